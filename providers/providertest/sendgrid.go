package providertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SendGridFake speaks SendGrid v3 mail send: POST /v3/mail/send with a Bearer API
// key → 202, empty body, X-Message-Id header.
type SendGridFake struct {
	*Fake
	// APIKey, when set, is the only key accepted (others get 401).
	APIKey string
}

// NewSendGrid starts a SendGrid fake; Close it when done.
func NewSendGrid() *SendGridFake {
	sg := &SendGridFake{}
	sg.Fake = newFake(sgProto{sg})
	return sg
}

// SendGridWebhookKey is a key of SendGrid's signed event webhook, made for a test:
// PublicKey is what a tenant configures (webhook_public_key: the P-256 public key,
// DER, base64); Sign signs a body as SendGrid does.
type SendGridWebhookKey struct {
	key       *ecdsa.PrivateKey
	PublicKey string
}

// NewSendGridWebhookKey makes a fresh SendGridWebhookKey.
func NewSendGridWebhookKey(t testing.TB) SendGridWebhookKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return SendGridWebhookKey{key: k, PublicKey: base64.StdEncoding.EncodeToString(der)}
}

// Sign is what SendGrid sends along with body at ts, computed as SendGrid
// documents it and independently of Herald's verifier: the signature (ECDSA over
// SHA-256(timestamp || body), ASN.1 DER, base64) and the timestamp (Unix
// seconds), the values of sendgrid.SignatureHeader and sendgrid.TimestampHeader.
func (k SendGridWebhookKey) Sign(t testing.TB, ts time.Time, body []byte) (signature, timestamp string) {
	t.Helper()
	timestamp = strconv.FormatInt(ts.Unix(), 10)
	sum := sha256.Sum256(append([]byte(timestamp), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k.key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig), timestamp
}

// SendGridError is SendGrid's error body: {"errors":[{message, field, help}]}.
func SendGridError(message, field string) string {
	b, _ := json.Marshal(map[string]any{"errors": []map[string]any{{"message": message, "field": field, "help": nil}}})
	return string(b)
}

// InvalidAddress answers 400 as SendGrid does for a malformed recipient.
func (*SendGridFake) InvalidAddress() Behavior {
	return Behavior{Status: http.StatusBadRequest,
		Body: SendGridError("Does not contain a valid address.", "personalizations.0.to.0.email")}
}

// Unauthorized answers 401 as SendGrid does for a revoked key.
func (*SendGridFake) Unauthorized() Behavior {
	return Behavior{Status: http.StatusUnauthorized,
		Body: SendGridError("The provided authorization grant is invalid, expired, or revoked", "")}
}

// SendGridMail is the part of a mail send body the tests look at.
type SendGridMail struct {
	From struct {
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"from"`
	ReplyTo *struct {
		Email string `json:"email"`
		Name  string `json:"name"`
	} `json:"reply_to"`
	Subject          string `json:"subject"`
	Personalizations []struct {
		To []struct {
			Email string `json:"email"`
			Name  string `json:"name"`
		} `json:"to"`
		Subject       string            `json:"subject"`
		Headers       map[string]string `json:"headers"`
		Substitutions map[string]string `json:"substitutions"`
		CustomArgs    map[string]string `json:"custom_args"`
	} `json:"personalizations"`
	Content []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"content"`
	Headers    map[string]string `json:"headers"`
	Categories []string          `json:"categories"`
	CustomArgs json.RawMessage   `json:"custom_args"`
}

// DecodeMail parses a recorded mail send body.
func DecodeMail(req Request) (SendGridMail, error) {
	var m SendGridMail
	err := json.Unmarshal(req.Body, &m)
	return m, err
}

// SendGridMaxSubstitutionBytes is SendGrid's limit on one personalization's
// substitutions, keys and values together ("may not exceed 10,000 bytes per
// personalization object", sendgrid_mail_v3.json); the fake answers 400 past it.
const SendGridMaxSubstitutionBytes = 10_000

// SendGridMessage is one message a mail send delivers: one personalization's,
// with its substitutions applied.
type SendGridMessage struct {
	// To are the personalization's recipients' addresses.
	To []string
	// Subject is the personalization's subject, else the mail's.
	Subject string
	// Text and HTML are the text/plain and text/html content ("" when absent).
	Text, HTML string
	// ReplyTo is the mail's reply-to address.
	ReplyTo string
	// Headers are the mail's headers overlaid with the personalization's.
	Headers    map[string]string
	CustomArgs map[string]string
	// MessageID is the X-Message-Id the fake answered the mail send with.
	MessageID string
}

// Messages are the messages the mail send delivers, one per personalization in
// order, as SendGrid documents substitutions: each substitution tag of the
// personalization is replaced by its value in the subject, the content and the
// reply-to. SendGrid documents no order; this applies the tags one after
// another in byte order of the tags, independently of how Herald applies them,
// so a test sees what an order-dependent map would do.
func (m SendGridMail) Messages() []SendGridMessage {
	var text, html string
	for _, c := range m.Content {
		switch c.Type {
		case "text/plain":
			text = c.Value
		case "text/html":
			html = c.Value
		}
	}
	replyTo := ""
	if m.ReplyTo != nil {
		replyTo = m.ReplyTo.Email
	}
	out := make([]SendGridMessage, 0, len(m.Personalizations))
	for _, p := range m.Personalizations {
		msg := SendGridMessage{Subject: m.Subject, Text: text, HTML: html, ReplyTo: replyTo, CustomArgs: p.CustomArgs,
			Headers: map[string]string{}}
		if p.Subject != "" {
			msg.Subject = p.Subject
		}
		for _, to := range p.To {
			msg.To = append(msg.To, to.Email)
		}
		for k, v := range m.Headers {
			msg.Headers[k] = v
		}
		for k, v := range p.Headers {
			msg.Headers[k] = v
		}
		tags := make([]string, 0, len(p.Substitutions))
		for k := range p.Substitutions {
			tags = append(tags, k)
		}
		sort.Strings(tags)
		for _, k := range tags {
			v := p.Substitutions[k]
			msg.Subject = strings.ReplaceAll(msg.Subject, k, v)
			msg.Text = strings.ReplaceAll(msg.Text, k, v)
			msg.HTML = strings.ReplaceAll(msg.HTML, k, v)
			msg.ReplyTo = strings.ReplaceAll(msg.ReplyTo, k, v)
		}
		out = append(out, msg)
	}
	return out
}

// Messages returns the messages of every accepted mail send, in arrival order
// (see SendGridMail.Messages): what each recipient received, substitutions
// applied. A body that does not parse is skipped (the fake refused it).
func (sg *SendGridFake) Messages() []SendGridMessage {
	var out []SendGridMessage
	for _, req := range sg.AcceptedRequests() {
		m, err := DecodeMail(req)
		if err != nil {
			continue
		}
		for _, msg := range m.Messages() {
			msg.MessageID = req.MessageID
			out = append(out, msg)
		}
	}
	return out
}

type sgProto struct{ sg *SendGridFake }

func (p sgProto) route(r *http.Request) *response {
	if r.Method != http.MethodPost || r.URL.Path != "/v3/mail/send" {
		return &response{status: http.StatusNotFound, body: SendGridError("not found", "")}
	}
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || auth == "" || (p.sg.APIKey != "" && auth != p.sg.APIKey) {
		b := p.sg.Unauthorized()
		return &response{status: b.Status, body: b.Body}
	}
	return nil
}

func (sgProto) validate(req *Request) *response {
	bad := func(msg, field string) *response {
		return &response{status: http.StatusBadRequest, body: SendGridError(msg, field)}
	}
	m, err := DecodeMail(*req)
	switch {
	case err != nil:
		return bad("Bad Request", "")
	case len(m.Personalizations) == 0 || len(m.Personalizations[0].To) == 0:
		return bad("The personalizations field is required and must have at least one personalization.", "personalizations")
	case !strings.Contains(m.Personalizations[0].To[0].Email, "@"):
		return bad("Does not contain a valid address.", "personalizations.0.to.0.email")
	case !strings.Contains(m.From.Email, "@"):
		return bad("The from object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.", "from.email")
	case len(m.Content) == 0:
		return bad("Unless a valid template_id is provided, the content parameter is required.", "content")
	case m.Subject == "" && m.Personalizations[0].Subject == "":
		return bad("The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.", "subject")
	}
	for i, p := range m.Personalizations {
		size := 0
		for k, v := range p.Substitutions {
			size += len(k) + len(v)
		}
		if size > SendGridMaxSubstitutionBytes {
			return bad("The total size of your substitutions may not exceed 10,000 bytes per personalization object.",
				"personalizations."+strconv.Itoa(i)+".substitutions")
		}
	}
	return nil
}

func (sgProto) accept(_ *Request, id string) response {
	return response{status: http.StatusAccepted, header: http.Header{"X-Message-Id": {id}}}
}

func (sgProto) newID(seq int) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%04d", base64.RawURLEncoding.EncodeToString(b[:]), seq%10000)
}

func (sgProto) errorBody(status int) string {
	return SendGridError(strings.ToLower(http.StatusText(status)), "")
}
