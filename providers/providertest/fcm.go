package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// FCMFake speaks FCM HTTP v1: POST /v1/projects/{project}/messages:send with an
// OAuth2 Bearer token → 200 {"name": "projects/{project}/messages/{id}"}.
type FCMFake struct {
	*Fake
	// Token, when set, is the only bearer token accepted.
	Token string

	tokenRequests int
}

// NewFCM starts an FCM fake; Close it when done.
func NewFCM() *FCMFake {
	f := &FCMFake{}
	f.Fake = newFake(fcmProto{f})
	return f
}

// FCMError is Google's error body with an FcmError detail (errorCode may be "").
func FCMError(status int, googleStatus, fcmCode, message string, extraDetails ...map[string]any) string {
	details := []map[string]any{}
	if fcmCode != "" {
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": fcmCode})
	}
	details = append(details, extraDetails...)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"code": status, "message": message, "status": googleStatus, "details": details}})
	return string(b)
}

// Unregistered answers as FCM does for an uninstalled app's token (404 UNREGISTERED).
func (*FCMFake) Unregistered() Behavior {
	return Behavior{Status: http.StatusNotFound, Body: FCMError(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")}
}

// InvalidToken answers as FCM does for a malformed registration token (400
// INVALID_ARGUMENT naming message.token).
func (*FCMFake) InvalidToken() Behavior {
	return Behavior{Status: http.StatusBadRequest, Body: FCMError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
		"The registration token is not a valid FCM registration token",
		map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest",
			"fieldViolations": []map[string]any{{"field": "message.token", "description": "The registration token is not a valid FCM registration token"}}})}
}

// QuotaExceeded answers 429 QUOTA_EXCEEDED with a Retry-After.
func (*FCMFake) QuotaExceeded(retryAfter string) Behavior {
	b := Behavior{Status: http.StatusTooManyRequests, Body: FCMError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.")}
	if retryAfter != "" {
		b.Header = http.Header{"Retry-After": {retryAfter}}
	}
	return b
}

// TokenPath is the fake's OAuth2 token endpoint: point the FCM sender's token
// URL (fcm.Config.TokenURL, resolver.Process.FCMTokenURL) at URL+TokenPath and
// the fake issues Token (or "fake-access-token").
const TokenPath = "/oauth2/token"

// TokenURL is the fake's token endpoint, URL+TokenPath (the FCM sender's
// TokenURL process setting).
func (f *FCMFake) TokenURL() string { return f.URL + TokenPath }

// TokenRequests counts token endpoint calls.
func (f *FCMFake) TokenRequests() int {
	f.Fake.mu.Lock()
	defer f.Fake.mu.Unlock()
	return f.tokenRequests
}

func (p fcmProto) side(r *http.Request, body []byte) *response {
	if r.URL.Path != TokenPath {
		return nil
	}
	form, _ := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || form.Get("assertion") == "" {
		return &response{status: http.StatusBadRequest, body: `{"error":"invalid_grant"}`}
	}
	p.f.Fake.mu.Lock()
	p.f.tokenRequests++
	p.f.Fake.mu.Unlock()
	tok := p.f.Token
	if tok == "" {
		tok = "fake-access-token"
	}
	b, _ := json.Marshal(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	return &response{status: http.StatusOK, body: string(b)}
}

var fcmPath = regexp.MustCompile(`^/v1/projects/([^/]+)/messages:send$`)

type fcmProto struct{ f *FCMFake }

func (p fcmProto) route(r *http.Request) *response {
	if r.Method != http.MethodPost || !fcmPath.MatchString(r.URL.Path) {
		return &response{status: http.StatusNotFound, body: FCMError(404, "NOT_FOUND", "", "Not Found")}
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" || (p.f.Token != "" && tok != p.f.Token) {
		return &response{status: http.StatusUnauthorized, body: FCMError(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR",
			"Request had invalid authentication credentials. Expected OAuth 2 access token.")}
	}
	return nil
}

// FCMSend is the part of a messages:send body the tests look at.
type FCMSend struct {
	ValidateOnly bool `json:"validateOnly"`
	Message      struct {
		Token        string            `json:"token"`
		Topic        string            `json:"topic"`
		Condition    string            `json:"condition"`
		Data         map[string]string `json:"data"`
		Notification *struct {
			Title string `json:"title"`
			Body  string `json:"body"`
		} `json:"notification"`
		Android *struct {
			CollapseKey  string `json:"collapseKey"`
			Notification *struct {
				Tag string `json:"tag"`
			} `json:"notification"`
		} `json:"android"`
		APNS *struct {
			Headers map[string]string `json:"headers"`
		} `json:"apns"`
		Webpush *struct {
			Headers map[string]string `json:"headers"`
		} `json:"webpush"`
	} `json:"message"`
}

// DecodeFCM parses a recorded messages:send body.
func DecodeFCM(req Request) (FCMSend, error) {
	var s FCMSend
	err := json.Unmarshal(req.Body, &s)
	return s, err
}

func (fcmProto) validate(req *Request) *response {
	s, err := DecodeFCM(*req)
	n := 0
	for _, v := range []string{s.Message.Token, s.Message.Topic, s.Message.Condition} {
		if v != "" {
			n++
		}
	}
	if err != nil || n != 1 {
		return &response{status: http.StatusBadRequest, body: FCMError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
			"Invalid JSON payload or exactly one of token, topic or condition must be set")}
	}
	for k := range s.Message.Data {
		if k == "from" || strings.HasPrefix(k, "google") || strings.HasPrefix(k, "gcm") {
			return &response{status: http.StatusBadRequest, body: FCMError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
				fmt.Sprintf("Invalid data payload key: %s", k))}
		}
	}
	return nil
}

func (fcmProto) accept(req *Request, id string) response {
	m := fcmPath.FindStringSubmatch(req.Path)
	b, _ := json.Marshal(map[string]string{"name": "projects/" + m[1] + "/messages/" + id})
	return response{status: http.StatusOK, body: string(b)}
}

func (fcmProto) newID(seq int) string {
	return fmt.Sprintf("0:%d%%fake%08d", 1700000000000000+seq, seq)
}

func (fcmProto) errorBody(status int) string {
	gs := map[int]string{429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}[status]
	code := map[int]string{429: "QUOTA_EXCEEDED", 500: "INTERNAL", 503: "UNAVAILABLE"}[status]
	if gs == "" {
		gs = "UNKNOWN"
	}
	return FCMError(status, gs, code, http.StatusText(status))
}
