package providertest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TwilioFake speaks Twilio's Messages resource: POST
// /2010-04-01/Accounts/{AccountSid}/Messages.json, form-encoded, HTTP basic auth →
// 201 with the Message resource as JSON.
type TwilioFake struct {
	*Fake
	// AccountSID and AuthToken, when set, are the only credentials accepted.
	AccountSID string
	AuthToken  string
}

// NewTwilio starts a Twilio fake; Close it when done.
func NewTwilio() *TwilioFake {
	tw := &TwilioFake{}
	tw.Fake = newFake(twProto{tw})
	return tw
}

// TwilioSignature is the X-Twilio-Signature Twilio sends with a webhook, computed
// as Twilio documents it and independently of twilio-go and of Herald's
// validator: HMAC-SHA1 keyed by the auth token over the full URL followed by the
// POST parameters sorted by name, name then (first) value, base64.
func TwilioSignature(token, fullURL string, form url.Values) string {
	var b strings.Builder
	b.WriteString(fullURL)
	for _, k := range slices.Sorted(maps.Keys(form)) {
		b.WriteString(k + form.Get(k))
	}
	m := hmac.New(sha1.New, []byte(token))
	m.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TwilioError is Twilio's error body: {code, message, more_info, status}.
func TwilioError(status, code int, message string) string {
	b, _ := json.Marshal(map[string]any{
		"code": code, "message": message, "status": status,
		"more_info": "https://www.twilio.com/docs/errors/" + strconv.Itoa(code),
	})
	return string(b)
}

// ErrorCode answers with Twilio error code (e.g. 21211) and HTTP status.
func (*TwilioFake) ErrorCode(status, code int, message string) Behavior {
	return Behavior{Status: status, Body: TwilioError(status, code, message)}
}

// InvalidTo answers as Twilio does for a malformed 'To' (21211).
func (tw *TwilioFake) InvalidTo() Behavior {
	return tw.ErrorCode(http.StatusBadRequest, 21211, "Invalid 'To' Phone Number: +1555NOPE")
}

// Unsubscribed answers as Twilio does for a recipient who replied STOP (21610).
func (tw *TwilioFake) Unsubscribed() Behavior {
	return tw.ErrorCode(http.StatusBadRequest, 21610, "Attempt to send to unsubscribed recipient")
}

// NotMobile answers as Twilio does for a landline 'To' (21614).
func (tw *TwilioFake) NotMobile() Behavior {
	return tw.ErrorCode(http.StatusBadRequest, 21614, "'To' number is not a valid mobile number")
}

var twPath = regexp.MustCompile(`^/2010-04-01/Accounts/(AC[0-9a-fA-F]{32})/Messages\.json$`)

type twProto struct{ tw *TwilioFake }

func (p twProto) route(r *http.Request) *response {
	m := twPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		return &response{status: http.StatusNotFound, body: TwilioError(404, 20404, "The requested resource "+r.URL.Path+" was not found")}
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user == "" || pass == "" || (p.tw.AccountSID != "" && (user != p.tw.AccountSID || m[1] != p.tw.AccountSID)) ||
		(p.tw.AuthToken != "" && pass != p.tw.AuthToken) {
		return &response{status: http.StatusUnauthorized, body: TwilioError(401, 20003, "Authenticate")}
	}
	return nil
}

func (twProto) validate(req *Request) *response {
	bad := func(code int, msg string) *response {
		return &response{status: http.StatusBadRequest, body: TwilioError(400, code, msg)}
	}
	f := req.Form
	switch {
	case f == nil:
		return bad(20001, "Unsupported content type: the body must be application/x-www-form-urlencoded")
	case f.Get("To") == "":
		return bad(21604, "A 'To' phone number is required.")
	case f.Get("Body") == "" && f.Get("ContentSid") == "" && f.Get("MediaUrl") == "":
		return bad(21602, "Message body is required.")
	case f.Get("From") == "" && f.Get("MessagingServiceSid") == "":
		return bad(21603, "A 'From' or 'MessagingServiceSid' parameter is required to send a message")
	}
	return nil
}

func (twProto) accept(req *Request, sid string) response {
	m := twPath.FindStringSubmatch(req.Path)
	now := time.Now().UTC().Format(time.RFC1123Z)
	var ms any
	if v := req.Form.Get("MessagingServiceSid"); v != "" {
		ms = v
	}
	body, _ := json.Marshal(map[string]any{
		"account_sid": m[1], "api_version": "2010-04-01", "body": req.Form.Get("Body"),
		"date_created": now, "date_sent": nil, "date_updated": now, "direction": "outbound-api",
		"error_code": nil, "error_message": nil, "from": req.Form.Get("From"), "messaging_service_sid": ms,
		"num_media": "0", "num_segments": "1", "price": nil, "price_unit": "USD", "sid": sid, "status": "queued",
		"to": req.Form.Get("To"), "uri": "/2010-04-01/Accounts/" + m[1] + "/Messages/" + sid + ".json",
		"subresource_uris": map[string]string{"media": "/2010-04-01/Accounts/" + m[1] + "/Messages/" + sid + "/Media.json"},
	})
	return response{status: http.StatusCreated, body: string(body)}
}

func (twProto) newID(int) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "SM" + hex.EncodeToString(b[:])
}

func (twProto) errorBody(status int) string {
	return TwilioError(status, 20000+status, http.StatusText(status))
}
