package unsubscribe

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTripAndTampering(t *testing.T) {
	s := NewSigner([]byte("master-secret-0123456789abcdef01"))
	c := Claims{TenantID: "t_1", UserID: "ada", Category: "marketing"}
	tok := s.Token(c)
	got, err := s.Verify(tok)
	if err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// Another user's claims with this user's signature.
	forged := s.Token(Claims{TenantID: "t_1", UserID: "bob", Category: "marketing"})
	mixed := strings.Split(forged, ".")[0] + "." + strings.Split(tok, ".")[1]
	other := NewSigner([]byte("another-secret-0123456789abcdef0")).Token(c)
	for name, bad := range map[string]string{"mixed": mixed, "other key": other, "no dot": "abc", "empty": "",
		"flipped": tok[:len(tok)-2] + "AA", "bad payload": "e30." + strings.Split(s.Token(Claims{}), ".")[1]} {
		if _, err := s.Verify(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", name, err)
		}
	}
	u, err := url.Parse(s.URL("https://h.example/", c))
	if err != nil || u.Path != Path {
		t.Fatalf("url: %v %v", u, err)
	}
	if back, err := s.Verify(u.Query().Get("token")); err != nil || back != c {
		t.Fatalf("url token: %+v %v", back, err)
	}
}

func TestLinksSurviveAKeyRotation(t *testing.T) {
	old := NewSigner([]byte("old-master"))
	c := Claims{TenantID: "t", UserID: "u", Category: "marketing"}
	tok := old.Token(c)
	rotated := NewSigner([]byte("new-master"), []byte("old-master"))
	if got, err := rotated.Verify(tok); err != nil || got != c {
		t.Fatalf("old link after rotation: %+v %v", got, err)
	}
	if _, err := NewSigner([]byte("new-master")).Verify(tok); !errors.Is(err, ErrInvalid) {
		t.Fatal("a signer without the old key accepted its link")
	}
	if rotated.Token(c) == tok {
		t.Fatal("new links must be signed with the new key")
	}
}

// A preference-centre token names its user and is no unsubscribe token, nor
// the other way round; a tampered one verifies as nothing.
func TestPageTokensAreTheirOwnKind(t *testing.T) {
	s := NewSigner([]byte("master"))
	now := time.Now()
	tok := s.PageToken("t1", "ada", now)
	tenant, user, _, err := s.VerifyPage(tok, now)
	if err != nil || tenant != "t1" || user != "ada" {
		t.Fatalf("VerifyPage: %q %q %v", tenant, user, err)
	}
	if _, err := s.Verify(tok); err == nil {
		t.Fatal("a page token unsubscribes")
	}
	if _, _, _, err := s.VerifyPage(s.Token(Claims{TenantID: "t1", UserID: "ada", Category: "*", IssuedAt: now.UnixMilli()}), now); err == nil {
		t.Fatal("an unsubscribe token opens the preference centre")
	}
	if _, _, _, err := s.VerifyPage(tok[:len(tok)-2]+"AA", now); err == nil {
		t.Fatal("a tampered page token verifies")
	}
	if _, _, _, err := NewSigner([]byte("other")).VerifyPage(tok, now); err == nil {
		t.Fatal("another deployment's page token verifies")
	}
	if _, _, _, err := NewSigner([]byte("new"), []byte("master")).VerifyPage(tok, now); err != nil {
		t.Fatalf("a page token of the previous key: %v", err)
	}
	// A page link expires; one without an issue time never opened anything.
	if _, _, _, err := s.VerifyPage(tok, now.Add(PageLinkTTL+time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("a page token past PageLinkTTL: %v", err)
	}
	if _, _, _, err := s.VerifyPage(s.page.Token(Claims{TenantID: "t1", UserID: "ada", Category: "*"}), now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a page token without an issue time: %v", err)
	}
}
