// Package fcm sends push notifications through Firebase Cloud Messaging's HTTP v1
// API (projects.messages.send) with Google's generated client
// google.golang.org/api/fcm/v1.
//
// # Why not the Firebase Admin SDK
//
// firebase.google.com/go/v4/messaging sends through an internal HTTP client with a
// fixed retry policy: every network error and every 503 is retried up to 4 times
// inside the one Send call, sleeping for Retry-After up to 2 minutes. A network
// error after FCM accepted the message therefore re-sends it inside the SDK, and a
// long Retry-After blocks the activity. The generated fcm/v1 client makes exactly
// one request per call, so retries (and their backoff and Retry-After) stay with
// the caller's retry policy, where they are visible and counted.
//
// # Idempotency
//
// FCM v1 messages:send has no idempotency key: a repeated request is a second
// message with a new message name. What Herald uses instead, all derived from the
// provider-side key notification_id:channel:
//   - android.notification.tag: a duplicate replaces the first in the notification
//     drawer. (Not android.collapse_key: FCM keeps at most four collapse keys per
//     device, so a key per notification could drop messages for an offline device.)
//   - apns-collapse-id: iOS shows notifications with the same collapse id as one;
//   - the webpush Topic header: a push service replaces an undelivered message
//     with the same topic;
//   - data herald_notification_id / herald_channel / herald_tenant, so the app can
//     drop a duplicate it already handled.
//
// FCM has no delivery receipts for Herald to match, so the residual window (the
// worker dies after FCM accepted, before Herald recorded it) can send a second
// push; the collapse keys make it replace the first on the device.
package fcm

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	fcmapi "google.golang.org/api/fcm/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
)

// Name is the provider name in Results, Errors and provider_configs.
const Name = "fcm"

// DefaultBaseURL is FCM's API root.
const DefaultBaseURL = "https://fcm.googleapis.com/"

// GoogleTokenURL is Google's OAuth 2.0 token endpoint, the only place a service
// account's signed assertion is sent (a key's token_uri is not used: it would
// let a tenant make the worker POST anywhere; see ValidTokenURI).
const GoogleTokenURL = "https://oauth2.googleapis.com/token"

// Data keys the sender adds to every message.
const (
	DataNotificationID = "herald_notification_id"
	DataChannel        = "herald_channel"
	DataTenant         = "herald_tenant"
)

// Config configures a Client.
type Config struct {
	// ProjectID is the Firebase project messages are sent from.
	ProjectID string
	// CredentialsJSON is a Google service account key file's contents (secret).
	CredentialsJSON []byte
	// TokenSource supplies OAuth2 tokens instead of CredentialsJSON (tests use a
	// static token).
	TokenSource oauth2.TokenSource
	// BaseURL replaces https://fcm.googleapis.com/ (tests point it at a fake).
	BaseURL string
	// TokenURL replaces GoogleTokenURL, the endpoint CredentialsJSON is
	// exchanged at for access tokens (a process setting: tests point it at a
	// fake). The key's own token_uri is never used.
	TokenURL string
	// HTTPClient carries both the token exchange and the FCM calls: its
	// transport, timeout and redirect policy are used (nil, or no transport:
	// the default egress policy's, which refuses internal addresses and
	// redirects; see egress.OrDefault).
	HTTPClient *http.Client
	// Timeout bounds one send; default 30 s.
	Timeout time.Duration
}

// Client sends push notifications through FCM. It is safe for concurrent use.
type Client struct {
	project string
	svc     *fcmapi.Service
	timeout time.Duration
}

var _ providers.PushSender = (*Client)(nil)

// New builds the FCM client. It does not call FCM.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.ProjectID == "" {
		return nil, providers.Errorf(Name, "config", "project ID is empty")
	}
	hc := egress.OrDefault(cfg.HTTPClient, 30*time.Second)
	ts := cfg.TokenSource
	if ts == nil {
		if len(cfg.CredentialsJSON) == 0 {
			return nil, providers.Errorf(Name, "config", "no credentials: set a service account key")
		}
		var err error
		if ts, err = serviceAccountTokens(ctx, cfg.CredentialsJSON, cfg.TokenURL, hc); err != nil {
			return nil, err
		}
	}
	// One client for the FCM calls: the access token added on hc's transport.
	// WithHTTPClient makes the API client use it as it is (no credentials of its
	// own, no transport of its own).
	api := &http.Client{Transport: &oauth2.Transport{Source: ts, Base: hc.Transport},
		Timeout: hc.Timeout, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar}
	base := DefaultBaseURL
	if cfg.BaseURL != "" {
		base = strings.TrimRight(cfg.BaseURL, "/") + "/"
	}
	svc, err := fcmapi.NewService(ctx, option.WithHTTPClient(api), option.WithEndpoint(base))
	if err != nil {
		return nil, providers.Errorf(Name, "config", "%v", err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Client{project: cfg.ProjectID, svc: svc, timeout: timeout}, nil
}

// serviceAccountTokens returns the cached token source of a service account
// key: a JWT assertion signed with the key, exchanged at tokenURL (""
// GoogleTokenURL) through hc. The key's token_uri and audience are ignored.
// Nothing is sent until the first token is needed.
func serviceAccountTokens(ctx context.Context, key []byte, tokenURL string, hc *http.Client) (oauth2.TokenSource, error) {
	jc, err := google.JWTConfigFromJSON(key, fcmapi.FirebaseMessagingScope)
	if err != nil {
		// The error may quote the key file.
		return nil, providers.Errorf(Name, "config", "credentials are not a service account key")
	}
	if jc.Email == "" {
		return nil, providers.Errorf(Name, "config", "the service account key has no client_email")
	}
	if err := checkPrivateKey(jc.PrivateKey); err != nil {
		return nil, err
	}
	if tokenURL == "" {
		tokenURL = GoogleTokenURL
	}
	jc.TokenURL, jc.Audience = tokenURL, ""
	// The token exchange goes through hc (oauth2 takes its client from the
	// context). ctx outlives this call: the source refreshes with it.
	return jc.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, hc)), nil
}

// checkPrivateKey parses the key's PEM RSA private key now, so a config whose
// key cannot sign is refused when it is stored, not at its first send.
func checkPrivateKey(p []byte) error {
	bad := providers.Errorf(Name, "config", "the service account's private_key is not a PEM RSA private key")
	block, _ := pem.Decode(p)
	if block == nil {
		return bad
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if _, ok := k.(*rsa.PrivateKey); ok {
			return nil
		}
		return bad
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return nil
	}
	return bad
}

// CollapseID derives the collapse identifiers from the provider-side key: 32 hex
// characters, within APNs' 64-byte apns-collapse-id and webpush's 32-character
// Topic limits.
func CollapseID(idempotencyKey string) string {
	sum := sha256.Sum256([]byte(idempotencyKey))
	return hex.EncodeToString(sum[:16])
}

// SendPush sends msg to one device token and returns the FCM message name
// (projects/{p}/messages/{id}).
func (c *Client) SendPush(ctx context.Context, msg providers.PushMessage, idempotencyKey string, tags providers.Tags) (providers.Result, error) {
	if err := tags.Validate(); err != nil {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
	}
	if strings.TrimSpace(msg.Token) == "" {
		return providers.Result{}, &providers.Error{Provider: Name, Code: "invalid_token", Reason: "device token is empty", Permanent: true, DeadToken: true}
	}
	if idempotencyKey == "" {
		idempotencyKey = tags.IdempotencyKey()
	}
	data := make(map[string]string, len(msg.Data)+3)
	for k, v := range msg.Data {
		data[k] = v
	}
	data[DataNotificationID], data[DataChannel], data[DataTenant] = tags.NotificationID, string(tags.Channel), tags.TenantID
	collapse := CollapseID(idempotencyKey)
	m := &fcmapi.Message{
		Token:   msg.Token,
		Data:    data,
		Android: &fcmapi.AndroidConfig{Notification: &fcmapi.AndroidNotification{Tag: collapse}},
		Apns:    &fcmapi.ApnsConfig{Headers: map[string]string{"apns-collapse-id": collapse}},
		Webpush: &fcmapi.WebpushConfig{Headers: map[string]string{"Topic": collapse}},
	}
	if msg.Title != "" || msg.Body != "" {
		m.Notification = &fcmapi.Notification{Title: msg.Title, Body: msg.Body}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.svc.Projects.Messages.Send("projects/"+c.project, &fcmapi.SendMessageRequest{Message: m}).Context(ctx).Do()
	if err != nil {
		return providers.Result{}, classify(err)
	}
	return providers.Result{Provider: Name, ProviderMessageID: resp.Name}, nil
}

type errorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type            string `json:"@type"`
			ErrorCode       string `json:"errorCode"`
			FieldViolations []struct {
				Field string `json:"field"`
			} `json:"fieldViolations"`
		} `json:"details"`
	} `json:"error"`
}

// invalidTokenMessage is FCM's message for a malformed registration token
// (HTTP v1 API, 400 INVALID_ARGUMENT).
const invalidTokenMessage = "The registration token is not a valid FCM registration token"

func classify(err error) *providers.Error {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return providers.TransportError(Name, err)
	}
	var eb errorBody
	_ = json.Unmarshal([]byte(ge.Body), &eb)
	code, tokenField := eb.Error.Status, false
	for _, d := range eb.Error.Details {
		if strings.HasSuffix(d.Type, "google.firebase.fcm.v1.FcmError") && d.ErrorCode != "" {
			code = d.ErrorCode
		}
		for _, fv := range d.FieldViolations {
			if fv.Field == "message.token" {
				tokenField = true
			}
		}
	}
	msg := eb.Error.Message
	if msg == "" {
		msg = ge.Message
	}
	pe := providers.HTTPError(Name, ge.Code, ge.Header, code, msg)
	pe.Err = err
	switch code {
	case "UNREGISTERED":
		// The app was uninstalled or the token expired: never valid again.
		pe.Permanent, pe.DeadToken = true, true
	case "SENDER_ID_MISMATCH":
		// The token belongs to another Firebase project: useless to this sender.
		pe.Permanent, pe.DeadToken = true, true
	case "INVALID_ARGUMENT":
		pe.Permanent = true
		// Only a token problem kills the token; another invalid field (a data key,
		// a payload too big) is our bug and keeps it. FCM names the token either
		// as a field violation of message.token or, without details, by its
		// message for a malformed token; nothing looser (a message merely
		// mentioning tokens) removes a user's device.
		pe.DeadToken = tokenField || msg == invalidTokenMessage || strings.HasPrefix(msg, "Invalid value at 'message.token'")
	case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL":
		pe.Permanent = false
	case "THIRD_PARTY_AUTH_ERROR":
		// APNs/web push credentials of the Firebase project are wrong.
		pe.Permanent = true
	}
	if ge.Code == http.StatusUnauthorized || ge.Code == http.StatusForbidden {
		pe.Permanent = true
	}
	return pe
}
