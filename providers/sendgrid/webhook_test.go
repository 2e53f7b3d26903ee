package sendgrid_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
)

type signer struct {
	providertest.SendGridWebhookKey
}

func newSigner(t *testing.T) signer { return signer{providertest.NewSendGridWebhookKey(t)} }

// sign does what SendGrid does: ECDSA over SHA-256(timestamp || body), DER, base64.
func (s signer) sign(t *testing.T, ts time.Time, body []byte) http.Header {
	t.Helper()
	sig, stamp := s.Sign(t, ts, body)
	return http.Header{sendgrid.SignatureHeader: {sig}, sendgrid.TimestampHeader: {stamp}}
}

const batch = `[
 {"email":"alice@example.com","timestamp":1700000000,"event":"processed","sg_event_id":"ev1","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","notification_id":"ntf_1","channel":"email","tenant":"t_acme"},
 {"email":"alice@example.com","timestamp":1700000005,"event":"delivered","sg_event_id":"ev2","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","response":"250 OK","notification_id":"ntf_1","channel":"email","tenant":"t_acme"},
 {"email":"bob@example.com","timestamp":1700000006,"event":"bounce","type":"bounce","status":"5.1.1","reason":"550 5.1.1 unknown user","sg_event_id":"ev3","sg_message_id":"abc.filter1","notification_id":"ntf_2","channel":"email","tenant":"t_acme"},
 {"email":"carol@example.com","timestamp":1700000007,"event":"dropped","reason":"Unsubscribed Address","sg_event_id":"ev4","sg_message_id":"def.filter1","notification_id":"ntf_3","channel":"email","tenant":"t_other"},
 {"email":"dave@example.com","timestamp":1700000008,"event":"deferred","response":"400 try again later","attempt":"1","sg_event_id":"ev5","sg_message_id":"ghi.filter1"},
 {"email":"alice@example.com","timestamp":1700000009,"event":"spamreport","sg_event_id":"ev6","sg_message_id":"14c5d75ce93.filter1"},
 {"email":"erin@example.com","timestamp":1700000010,"event":"delivered","sg_event_id":"ev7","sg_message_id":"jkl.filter1","notification_id":12,"channel":"email","tenant":"t_acme"}
]`

func TestWebhookSignatureVerifies(t *testing.T) {
	s := newSigner(t)
	v, err := sendgrid.NewWebhookVerifier(s.PublicKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(batch)
	now := time.Now()
	if err := v.Verify(s.sign(t, now, body), body); err != nil {
		t.Fatalf("valid signature rejected: %v", err)
	}

	tampered := append([]byte(nil), body...)
	tampered[10] ^= 1
	if err := v.Verify(s.sign(t, now, body), tampered); !errors.Is(err, sendgrid.ErrBadSignature) {
		t.Fatalf("tampered body: %v", err)
	}
	h := s.sign(t, now, body)
	h.Set(sendgrid.TimestampHeader, strconv.FormatInt(now.Unix()+1, 10)) // signature was for another timestamp
	if err := v.Verify(h, body); !errors.Is(err, sendgrid.ErrBadSignature) {
		t.Fatalf("swapped timestamp: %v", err)
	}
	if err := v.Verify(s.sign(t, now.Add(-2*time.Minute), body), body); !errors.Is(err, sendgrid.ErrStaleTimestamp) {
		t.Fatalf("stale timestamp: %v", err)
	}
	if err := v.Verify(s.sign(t, now.Add(2*time.Minute), body), body); !errors.Is(err, sendgrid.ErrStaleTimestamp) {
		t.Fatalf("future timestamp: %v", err)
	}
	if err := v.Verify(http.Header{}, body); !errors.Is(err, sendgrid.ErrMissingSignature) {
		t.Fatalf("no headers: %v", err)
	}
	other := newSigner(t)
	if err := v.Verify(other.sign(t, now, body), body); !errors.Is(err, sendgrid.ErrBadSignature) {
		t.Fatalf("another key's signature: %v", err)
	}
	h = s.sign(t, now, body)
	h.Set(sendgrid.SignatureHeader, "not base64!")
	if err := v.Verify(h, body); !errors.Is(err, sendgrid.ErrBadSignature) {
		t.Fatalf("garbage signature: %v", err)
	}

	// Tolerance is configurable; Now is injectable.
	v.Tolerance = time.Hour
	v.Now = func() time.Time { return now.Add(30 * time.Minute) }
	if err := v.Verify(s.sign(t, now, body), body); err != nil {
		t.Fatalf("within a 1h tolerance: %v", err)
	}
}

func TestWebhookVerifierRejectsNonP256Keys(t *testing.T) {
	for name, gen := range map[string]func() any{
		"P-384": func() any { k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader); return &k.PublicKey },
		"RSA":   func() any { k, _ := rsa.GenerateKey(rand.Reader, 1024); return &k.PublicKey },
	} {
		der, err := x509.MarshalPKIXPublicKey(gen())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sendgrid.NewWebhookVerifier(base64.StdEncoding.EncodeToString(der), 0); err == nil {
			t.Errorf("%s key accepted", name)
		}
	}
	if _, err := sendgrid.NewWebhookVerifier("%%%", 0); err == nil {
		t.Error("garbage key accepted")
	}
}

func TestParseEvents(t *testing.T) {
	rs, err := sendgrid.ParseEvents([]byte(batch))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 6 {
		t.Fatalf("got %d receipts, want 6 (spamreport left out): %+v", len(rs), rs)
	}
	want := []struct {
		status providers.ReceiptStatus
		ntf    string
		msgID  string
		reason string
	}{
		{providers.ReceiptAccepted, "ntf_1", "14c5d75ce93", ""},
		{providers.ReceiptDelivered, "ntf_1", "14c5d75ce93", ""},
		{providers.ReceiptFailed, "ntf_2", "abc", "550 5.1.1 unknown user (5.1.1)"},
		{providers.ReceiptFailed, "ntf_3", "def", "Unsubscribed Address"},
		{providers.ReceiptDeferred, "", "ghi", "400 try again later"},
		{providers.ReceiptDelivered, "", "jkl", ""}, // non-string custom arg is ignored
	}
	for i, w := range want {
		r := rs[i]
		if r.Status != w.status || r.NotificationID != w.ntf || r.ProviderMessageID != w.msgID || r.Reason != w.reason || r.Provider != "sendgrid" {
			t.Errorf("receipt %d = %+v, want %+v", i, r, w)
		}
	}
	if !rs[0].Named() || rs[0].TenantID != "t_acme" || rs[0].Channel != "email" || rs[0].EventID != "ev1" ||
		!rs[0].OccurredAt.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("receipt 0 = %+v", rs[0])
	}
	if rs[4].Named() {
		t.Error("untagged event claims to be named")
	}
	if got := providers.FilterTenant(rs, "t_acme"); len(got) != 4 {
		t.Errorf("FilterTenant kept %d, want 4", len(got))
	}
	if rs[1].DeliveryStatus() != "delivered" || rs[0].DeliveryStatus() != "sent" || rs[2].DeliveryStatus() != "failed" || rs[4].DeliveryStatus() != "sent" {
		t.Error("DeliveryStatus mapping")
	}
	if _, err := sendgrid.ParseEvents([]byte(`{"not":"an array"}`)); err == nil {
		t.Error("non-array body accepted")
	}
}

// Hard bounces, drops, spam reports and global unsubscribes list the address;
// a soft bounce ("blocked") and a group unsubscribe do not.
func TestParseBatchListsSuppressedAddresses(t *testing.T) {
	body := `[
 {"email":"Bob@Example.com","event":"bounce","type":"bounce","reason":"550 5.1.1 unknown user","tenant":"t_acme"},
 {"email":"soft@example.com","event":"bounce","type":"blocked","reason":"421 try later","tenant":"t_acme"},
 {"email":"carol@example.com","event":"dropped","reason":"Bounced Address"},
 {"email":"alice@example.com","event":"spamreport","tenant":"t_acme"},
 {"email":"erin@example.com","event":"unsubscribe","tenant":"t_other"},
 {"email":"gina@example.com","event":"group_unsubscribe","asm_group_id":1},
 {"event":"spamreport"}
]`
	p, err := sendgrid.ParseBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.AddressEvent{
		{Provider: "sendgrid", TenantID: "t_acme", Channel: "email", Address: "Bob@Example.com", Suppress: true, Reason: herald.SuppressionBounce, Detail: "550 5.1.1 unknown user"},
		{Provider: "sendgrid", Channel: "email", Address: "carol@example.com", Suppress: true, Reason: herald.SuppressionDropped, Detail: "Bounced Address"},
		{Provider: "sendgrid", TenantID: "t_acme", Channel: "email", Address: "alice@example.com", Suppress: true, Reason: herald.SuppressionSpamReport},
		{Provider: "sendgrid", TenantID: "t_other", Channel: "email", Address: "erin@example.com", Suppress: true, Reason: herald.SuppressionUnsubscribe},
	}
	if !reflect.DeepEqual(p.Addresses, want) {
		t.Fatalf("addresses = %+v\nwant %+v", p.Addresses, want)
	}
	if len(p.Receipts) != 3 { // the two bounces and the drop are receipts too
		t.Fatalf("receipts = %+v", p.Receipts)
	}
	if got := providers.FilterAddressTenant(p.Addresses, "t_acme"); len(got) != 3 || got[2].Address != "alice@example.com" {
		t.Fatalf("FilterAddressTenant kept %+v", got)
	}
}
