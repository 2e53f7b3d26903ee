package providertest_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers/providertest"
)

func post(t *testing.T, f *providertest.SendGridFake) int {
	t.Helper()
	body := `{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"b@example.com"},"subject":"s","content":[{"type":"text/plain","value":"x"}]}`
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/v3/mail/send", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestQueueAlwaysAndRecover(t *testing.T) {
	f := providertest.NewSendGrid()
	defer f.Close()
	f.Next(providertest.Fail500(), providertest.Fail429("1"))
	if s := post(t, f); s != 500 {
		t.Fatalf("first = %d", s)
	}
	if s := post(t, f); s != 429 {
		t.Fatalf("second = %d", s)
	}
	if s := post(t, f); s != 202 {
		t.Fatalf("third = %d", s)
	}
	f.Always(providertest.Fail503("2"))
	if s := post(t, f); s != 503 {
		t.Fatalf("outage = %d", s)
	}
	f.Recover()
	if s := post(t, f); s != 202 {
		t.Fatalf("recovered = %d", s)
	}
	if f.Accepted() != 2 || f.Calls() != 5 || len(f.AcceptedRequests()) != 2 {
		t.Fatalf("accepted %d of %d", f.Accepted(), f.Calls())
	}
	r := f.Requests()[0]
	if r.Status != 500 || r.Accepted || r.Method != "POST" || r.Path != "/v3/mail/send" || len(r.Body) == 0 {
		t.Fatalf("recorded %+v", r)
	}
	f.Reset()
	if f.Calls() != 0 || f.Accepted() != 0 {
		t.Fatal("Reset")
	}
}

func TestHoldRejectAndAccept(t *testing.T) {
	f := providertest.NewSendGrid()
	defer f.Close()

	h := f.HoldNext(false)
	got := make(chan int, 1)
	go func() { got <- post(t, f) }()
	<-h.Arrived()
	if f.Accepted() != 0 {
		t.Fatal("accepted before release without acceptFirst")
	}
	h.Reject(providertest.Fail500())
	if s := <-got; s != 500 || f.Accepted() != 0 {
		t.Fatalf("rejected hold: %d, accepted %d", s, f.Accepted())
	}

	h = f.HoldNext(false)
	go func() { got <- post(t, f) }()
	<-h.Arrived()
	h.Release()
	if s := <-got; s != 202 || f.Accepted() != 1 {
		t.Fatalf("released hold: %d, accepted %d", s, f.Accepted())
	}
}

func TestCloseReleasesHeldRequests(t *testing.T) {
	f := providertest.NewSendGrid()
	h := f.HoldNext(false)
	done := make(chan struct{})
	go func() { post(t, f); close(done) }()
	<-h.Arrived()
	closed := make(chan struct{})
	go func() { f.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a held request")
	}
	<-done
}

func TestConcurrentRequestsAreCountedOnce(t *testing.T) {
	f := providertest.NewSendGrid()
	defer f.Close()
	f.Next(providertest.Fail500(), providertest.Fail500(), providertest.Fail500())
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); post(t, f) }()
	}
	wg.Wait()
	if f.Calls() != 40 || f.Accepted() != 37 {
		t.Fatalf("calls %d accepted %d", f.Calls(), f.Accepted())
	}
	ids := map[string]bool{}
	for _, r := range f.AcceptedRequests() {
		if ids[r.MessageID] {
			t.Fatalf("duplicate message id %s", r.MessageID)
		}
		ids[r.MessageID] = true
	}
	if !f.WaitCalls(40, time.Millisecond) || f.WaitCalls(41, 50*time.Millisecond) {
		t.Fatal("WaitCalls")
	}
}

func TestWrongRouteAndAuth(t *testing.T) {
	f := providertest.NewSendGrid()
	defer f.Close()
	resp, err := http.Post(f.URL+"/v3/other", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("wrong path: %d", resp.StatusCode)
	}
	resp, _ = http.Post(f.URL+"/v3/mail/send", "application/json", strings.NewReader("{}"))
	resp.Body.Close()
	if resp.StatusCode != 401 || f.Accepted() != 0 {
		t.Fatalf("no auth: %d", resp.StatusCode)
	}
}

func TestSpecPathFindsVendoredSpecs(t *testing.T) {
	for _, name := range []string{providertest.SpecTwilioAPI, providertest.SpecSendGridMail} {
		p, err := providertest.SpecPath(name)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if !strings.HasSuffix(filepath.ToSlash(p), "/providers/testdata/"+name) {
			t.Fatalf("SpecPath = %s", p)
		}
	}
	if _, err := providertest.SpecPath("nope.json"); err == nil || !strings.Contains(err.Error(), "providers/testdata") {
		t.Fatalf("missing spec: %v", err)
	}
}
