package providers

import "errors"

// ErrNoProvider: the tenant configured no (enabled) provider for the channel and
// the process does not fall back to the sandbox provider. The resolver returns
// it wrapped with the channel; the delivery activity turns it into a
// non-retryable herald.ErrTypeNoProvider error, so the channel fails with reason
// no_provider instead of being "sent" by a sandbox that sends nothing.
var ErrNoProvider = errors.New("no provider is configured")
