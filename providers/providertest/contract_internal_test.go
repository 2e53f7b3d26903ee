package providertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestLoadSpecOnce: concurrent loads of one spec parse it once and share it.
func TestLoadSpecOnce(t *testing.T) {
	const n = 8
	got := make([]*contractSpec, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := loadSpec(SpecSendGridMail)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		}()
	}
	wg.Wait()
	for _, s := range got[1:] {
		if s == nil || s != got[0] {
			t.Fatal("loadSpec returned different documents for one file")
		}
	}
	a, b := NewContractServer(t, SpecSendGridMail), NewContractServer(t, SpecSendGridMail)
	if a.spec != got[0] || b.spec != got[0] {
		t.Fatal("servers did not share the cached document")
	}
	if _, err := loadSpec("nope.json"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing spec: %v", err)
	}
}

// TestCheckAnswerRejectsNonConformingAnswers: a success answer the spec does not
// allow is caught (here a status the operation does not list).
func TestCheckAnswerRejectsNonConformingAnswers(t *testing.T) {
	s := NewContractServer(t, SpecSendGridMail)
	r := httptest.NewRequest(http.MethodPost, "/v3/mail/send", strings.NewReader(""))
	route, params, err := s.spec.router.FindRoute(r)
	if err != nil {
		t.Fatal(err)
	}
	in := *requestInput(r, route, params)
	if err := s.checkAnswer(&in, &response{status: http.StatusAccepted}); err != nil {
		t.Fatalf("202: %v", err)
	}
	if err := s.checkAnswer(&in, &response{status: http.StatusOK}); err == nil {
		t.Fatal("200 is not a status POST /v3/mail/send lists, but the answer passed")
	}
}
