package providertest

import "time"

// WaitUntil is the wait loop every test server's Wait method shares (the HTTP
// fakes' WaitCalls, smtptest's WaitMessages): it calls check, which reports under
// the server's lock whether the condition holds and the channel the server closes
// at its next change, until the condition holds (true) or d has passed (false).
func WaitUntil(d time.Duration, check func() (done bool, changed <-chan struct{})) bool {
	deadline := time.After(d)
	for {
		done, changed := check()
		if done {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}
