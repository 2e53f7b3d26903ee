package breaker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/breaker"
)

var tags = providers.Tags{TenantID: "t_acme", NotificationID: "ntf_1", Channel: herald.ChannelEmail}

// fake answers every call with the current err (nil: success) and counts calls.
type fake struct {
	mu    sync.Mutex
	err   error
	calls atomic.Int64
}

func (f *fake) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fake) answer() (providers.Result, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return providers.Result{}, f.err
	}
	return providers.Result{Provider: "fake", ProviderMessageID: "m1"}, nil
}

func (f *fake) SendEmail(context.Context, providers.EmailMessage, string, providers.Tags) (providers.Result, error) {
	return f.answer()
}

func (f *fake) SendSMS(context.Context, providers.SMSMessage, string, providers.Tags) (providers.Result, error) {
	return f.answer()
}

func (f *fake) SendPush(context.Context, providers.PushMessage, string, providers.Tags) (providers.Result, error) {
	return f.answer()
}

var (
	unavailable = &providers.Error{Provider: "fake", Code: "http_503", Reason: "Service Unavailable", StatusCode: 503}
	timeout     = &providers.Error{Provider: "fake", Code: "timeout", Reason: "i/o timeout"}
	badAddress  = &providers.Error{Provider: "fake", Code: "invalid_address", Reason: "bad address", Permanent: true}
	badCreds    = &providers.Error{Provider: "fake", Code: "auth", Reason: "credentials rejected", Permanent: true}
)

func sendEmail(s providers.EmailSender) error {
	_, err := s.SendEmail(context.Background(), providers.EmailMessage{To: "a@example.com"}, tags.IdempotencyKey(), tags)
	return err
}

func TestTripsAfterConsecutiveRetryableFailures(t *testing.T) {
	f := &fake{}
	f.set(unavailable)
	var transitions []string
	var mu sync.Mutex
	set := breaker.NewSet(breaker.Config{Failures: 3, CoolDown: time.Minute, OnStateChange: func(key string, from, to breaker.State) {
		mu.Lock()
		defer mu.Unlock()
		transitions = append(transitions, key+":"+from.String()+"->"+to.String())
	}})
	s := set.Email("t_acme/email/sendgrid/0", "sendgrid", f)
	for i := 0; i < 3; i++ {
		if err := sendEmail(s); !errors.Is(err, unavailable) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := set.Get("t_acme/email/sendgrid/0").State(); got != breaker.StateOpen {
		t.Fatalf("state %v after 3 failures", got)
	}
	start := time.Now()
	err := sendEmail(s)
	pe, ok := providers.AsError(err)
	if !ok || pe.Code != breaker.CodeOpen || pe.Permanent || pe.Provider != "sendgrid" || pe.Reason == "" ||
		pe.RetryAfter <= 50*time.Second || pe.RetryAfter > time.Minute || !breaker.IsOpen(err) || providers.IsPermanent(err) {
		t.Fatalf("open error %+v", pe)
	}
	if f.calls.Load() != 3 || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("provider called %d times while open", f.calls.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(transitions) != 1 || transitions[0] != "t_acme/email/sendgrid/0:closed->open" {
		t.Fatalf("transitions %v", transitions)
	}
}

func TestSuccessResetsTheCount(t *testing.T) {
	f := &fake{}
	b := breaker.New("k", breaker.Config{Failures: 3, CoolDown: time.Minute})
	s := b.Email("fake", f)
	for round := 0; round < 5; round++ {
		f.set(timeout)
		_ = sendEmail(s)
		_ = sendEmail(s)
		f.set(nil)
		if err := sendEmail(s); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if b.State() != breaker.StateClosed {
		t.Fatalf("state %v", b.State())
	}
}

func TestPermanentErrorsDoNotTrip(t *testing.T) {
	f := &fake{}
	b := breaker.New("k", breaker.Config{Failures: 2, CoolDown: time.Minute})
	s := b.Email("fake", f)
	f.set(badAddress)
	for i := 0; i < 10; i++ {
		if err := sendEmail(s); !errors.Is(err, badAddress) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	f.set(badCreds)
	for i := 0; i < 10; i++ {
		_ = sendEmail(s)
	}
	f.set(context.Canceled)
	for i := 0; i < 10; i++ {
		_ = sendEmail(s)
	}
	if b.State() != breaker.StateClosed || f.calls.Load() != 30 {
		t.Fatalf("state %v after %d permanent errors", b.State(), f.calls.Load())
	}
	// Permanent errors do not reset the count either: one retryable failure,
	// permanent ones, another retryable failure → open.
	f.set(unavailable)
	_ = sendEmail(s)
	f.set(badAddress)
	_ = sendEmail(s)
	f.set(unavailable)
	_ = sendEmail(s)
	if b.State() != breaker.StateOpen {
		t.Fatalf("state %v", b.State())
	}
}

func TestNonProviderErrorsCount(t *testing.T) {
	f := &fake{}
	b := breaker.New("k", breaker.Config{Failures: 2, CoolDown: time.Minute})
	f.set(errors.New("boom"))
	s := b.SMS("twilio", f)
	for i := 0; i < 2; i++ {
		_, _ = s.SendSMS(context.Background(), providers.SMSMessage{}, "k", tags)
	}
	_, err := s.SendSMS(context.Background(), providers.SMSMessage{}, "k", tags)
	if pe, ok := providers.AsError(err); !ok || pe.Code != breaker.CodeOpen || pe.Provider != "twilio" {
		t.Fatalf("%v", err)
	}
}

func TestRecoversAfterCoolDown(t *testing.T) {
	f := &fake{}
	b := breaker.New("k", breaker.Config{Failures: 2, CoolDown: 300 * time.Millisecond})
	s := b.Push("fcm", f)
	push := func() error {
		_, err := s.SendPush(context.Background(), providers.PushMessage{Token: "tok"}, "k", tags)
		return err
	}
	f.set(unavailable)
	_, _ = push(), push()
	if !breaker.IsOpen(push()) || f.calls.Load() != 2 {
		t.Fatal("not open")
	}
	// Still down after the cool-down: the probe fails and the breaker opens again.
	time.Sleep(400 * time.Millisecond)
	if b.State() != breaker.StateHalfOpen {
		t.Fatalf("state %v after cool-down", b.State())
	}
	if err := push(); !errors.Is(err, unavailable) || f.calls.Load() != 3 {
		t.Fatalf("probe: %v (%d calls)", err, f.calls.Load())
	}
	if b.State() != breaker.StateOpen || !breaker.IsOpen(push()) {
		t.Fatalf("failed probe left state %v", b.State())
	}
	// Back up: after the next cool-down the probe succeeds and the breaker closes.
	f.set(nil)
	time.Sleep(400 * time.Millisecond)
	if err := push(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if b.State() != breaker.StateClosed {
		t.Fatalf("state %v after a good probe", b.State())
	}
	for i := 0; i < 5; i++ {
		if err := push(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHalfOpenLetsOnlyTheProbesThrough(t *testing.T) {
	f := &fake{}
	b := breaker.New("k", breaker.Config{Failures: 1, CoolDown: 50 * time.Millisecond})
	release := make(chan struct{})
	started := make(chan struct{})
	f.set(unavailable)
	_ = sendEmail(b.Email("fake", f))
	time.Sleep(80 * time.Millisecond)
	done := make(chan error)
	go func() {
		_, err := b.Do("fake", func() (providers.Result, error) {
			close(started)
			<-release
			return providers.Result{Provider: "fake"}, nil
		})
		done <- err
	}()
	<-started
	err := sendEmail(b.Email("fake", f))
	if pe, ok := providers.AsError(err); !ok || pe.Code != breaker.CodeOpen || pe.RetryAfter <= 0 {
		t.Fatalf("second call while the probe is in flight: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.State() != breaker.StateClosed {
		t.Fatalf("state %v", b.State())
	}
}

func TestSetKeepsOneBreakerPerKey(t *testing.T) {
	set := breaker.NewSet(breaker.Config{Failures: 1, CoolDown: time.Minute})
	a, b := &fake{}, &fake{}
	a.set(unavailable)
	keyA := breaker.Key(providers.ProviderConfig{TenantID: "t_acme", Channel: "email", Provider: "sendgrid", Priority: 0})
	keyB := breaker.Key(providers.ProviderConfig{TenantID: "t_acme", Channel: "email", Provider: "smtp", Priority: 1})
	if keyA != "t_acme/email/sendgrid/0" || keyA == keyB {
		t.Fatalf("keys %q %q", keyA, keyB)
	}
	if first, second := set.Get(keyA), set.Get(keyA); first != second {
		t.Fatal("Get made two breakers for one key")
	}
	// A fresh wrapper for the same key (the resolver builds a sender per call)
	// shares the state.
	_ = sendEmail(set.Email(keyA, "sendgrid", a))
	if !breaker.IsOpen(sendEmail(set.Email(keyA, "sendgrid", a))) {
		t.Fatal("state not shared between wrappers of one key")
	}
	if err := sendEmail(set.Email(keyB, "smtp", b)); err != nil {
		t.Fatalf("other key affected: %v", err)
	}
	st := set.States()
	if st[keyA] != breaker.StateOpen || st[keyB] != breaker.StateClosed {
		t.Fatalf("states %v", st)
	}
}

func TestFailoverChainMovesOnAtOnce(t *testing.T) {
	set := breaker.NewSet(breaker.Config{Failures: 2, CoolDown: time.Minute})
	primary, secondary := &fake{}, &fake{}
	primary.set(timeout)
	chain := []providers.EmailSender{set.Email("p", "sendgrid", primary), set.Email("s", "smtp", secondary)}
	sendChain := func() error {
		var err error
		for _, s := range chain {
			if err = sendEmail(s); err == nil || providers.IsPermanent(err) {
				return err
			}
		}
		return err
	}
	for i := 0; i < 10; i++ {
		if err := sendChain(); err != nil {
			t.Fatal(err)
		}
	}
	if primary.calls.Load() != 2 || secondary.calls.Load() != 10 {
		t.Fatalf("primary called %d times, secondary %d", primary.calls.Load(), secondary.calls.Load())
	}
}

func TestConcurrentUse(t *testing.T) {
	set := breaker.NewSet(breaker.Config{Failures: 5, CoolDown: 20 * time.Millisecond})
	f := &fake{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				key := []string{"a", "b", "c"}[i%3]
				err := sendEmail(set.Email(key, "fake", f))
				if err != nil && !errors.Is(err, unavailable) && !breaker.IsOpen(err) {
					t.Errorf("unexpected %v", err)
					return
				}
				_ = set.States()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if i%2 == 0 {
				f.set(unavailable)
			} else {
				f.set(nil)
			}
		}
	}()
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	// Whatever happened, after a healthy cool-down every breaker closes again.
	f.set(nil)
	time.Sleep(40 * time.Millisecond)
	for _, key := range []string{"a", "b", "c"} {
		if err := sendEmail(set.Email(key, "fake", f)); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if st := set.Get(key).State(); st != breaker.StateClosed {
			t.Fatalf("%s: %v", key, st)
		}
	}
}

func TestCountsAsFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{unavailable, true},
		{timeout, true},
		{&providers.Error{Code: "http_429", RetryAfter: time.Second}, true},
		{badAddress, false},
		{badCreds, false},
		{&providers.Error{Code: "canceled"}, false},
		{&providers.Error{Code: breaker.CodeOpen}, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, true},
		{errors.New("boom"), true},
	} {
		if got := breaker.CountsAsFailure(tc.err); got != tc.want {
			t.Errorf("CountsAsFailure(%v) = %v", tc.err, got)
		}
	}
}
