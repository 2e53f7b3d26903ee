package providers_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
)

func TestSafeText(t *testing.T) {
	cases := map[string]string{
		"plain":                   "plain",
		"two\nlines\r\tand a tab": "two lines  and a tab",
		"esc\x1b[31mred\x00\x7f":  "esc[31mred",
		"bad \xff\xfe utf8":       "bad \uFFFD utf8",
		"bidi \u202eevil":         "bidi evil",
		"ünïcødé ok":              "ünïcødé ok",
	}
	for in, want := range cases {
		if got := providers.SafeText(in, 100); got != want {
			t.Errorf("SafeText(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("é", 1000) // 2 bytes each
	got := providers.SafeText(long, 512)
	if len(got) > 512 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("cut to %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got[len(got)-10:])
	}
	if got := providers.SafeText(strings.Repeat("a", 512), 512); len(got) != 512 || strings.HasSuffix(got, "…") {
		t.Fatalf("a text of exactly the limit was cut: %d", len(got))
	}
}

func TestErrorShowsABoundedReason(t *testing.T) {
	e := &providers.Error{Provider: "sendgrid", Code: "http_400", Permanent: true, Reason: strings.Repeat("x", 10_000) + "\x1b"}
	if got := e.Error(); len(got) > len("sendgrid: permanent [http_400]: ")+providers.MaxReasonBytes {
		t.Fatalf("Error() is %d bytes", len(got))
	}
}

func TestTransportErrorOfAnEgressRefusal(t *testing.T) {
	err := &egress.RefusedError{Host: "relay.tenant.example", Addr: "10.1.2.3:25", Why: "10.1.2.3 is not a permitted destination"}
	pe := providers.TransportError("smtp", errors.Join(errors.New("dial tcp"), err))
	if pe.Code != "egress_refused" || !pe.Permanent || strings.Contains(pe.Error(), "10.1.2.3") || !strings.Contains(pe.Error(), "relay.tenant.example") {
		t.Fatalf("%#v", pe)
	}
	rd := providers.TransportError("sendgrid", &egress.RedirectError{Status: 302})
	if rd.Code != "redirect" || rd.Permanent || !strings.Contains(rd.Reason, "302") {
		t.Fatalf("%#v", rd)
	}
}
