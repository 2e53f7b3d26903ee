package providers_test

import (
	"strings"
	"testing"

	"github.com/herald-notify/herald/providers"
)

func TestPersonalize(t *testing.T) {
	m := providers.EmailMessage{To: "a@example.com", Subject: "Hi -a-", HTML: "<p>-a- -ab- -b-</p>", Text: "-b-/-a-", ReplyTo: "r@example.com"}
	if got := m.Personalize(nil); got.Subject != m.Subject || got.HTML != m.HTML || got.Text != m.Text {
		t.Fatalf("no substitutions changed the message: %+v", got)
	}
	got := m.Personalize(map[string]string{"-a-": "A", "-ab-": "AB", "-b-": "-a-"})
	// At once: a value is not substituted again; the longer key wins where both start.
	if got.Subject != "Hi A" || got.HTML != "<p>A AB -a-</p>" || got.Text != "-a-/A" || got.To != m.To || got.ReplyTo != m.ReplyTo {
		t.Fatalf("personalized %+v", got)
	}
	if m.Subject != "Hi -a-" {
		t.Fatal("Personalize changed its receiver")
	}
}

func TestCheckSubstitutions(t *testing.T) {
	m := providers.EmailMessage{Subject: "x", Text: "x", ReplyTo: "help@acme.example"}
	if err := providers.CheckSubstitutions("p", m, nil); err != nil {
		t.Fatal(err)
	}
	if err := providers.CheckSubstitutions("p", m, map[string]string{"-k-": strings.Repeat("v", providers.MaxSubstitutionBytes-3)}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	for name, subs := range map[string]map[string]string{
		"over the limit":  {"-k-": strings.Repeat("v", providers.MaxSubstitutionBytes-2)},
		"empty key":       {"": "v"},
		"key in reply-to": {"help": "v"},
	} {
		if err := providers.CheckSubstitutions("p", m, subs); !providers.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
}
