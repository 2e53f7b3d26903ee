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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
	fcmapi "google.golang.org/api/fcm/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/herald-notify/herald/providers"
)

// Name is the provider name in Results, Errors and provider_configs.
const Name = "fcm"

// DefaultBaseURL is FCM's API root.
const DefaultBaseURL = "https://fcm.googleapis.com/"

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
	opts := []option.ClientOption{option.WithScopes(fcmapi.FirebaseMessagingScope)}
	switch {
	case cfg.TokenSource != nil:
		opts = append(opts, option.WithTokenSource(cfg.TokenSource))
	case len(cfg.CredentialsJSON) > 0:
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, cfg.CredentialsJSON))
	default:
		return nil, providers.Errorf(Name, "config", "no credentials: set a service account key")
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimRight(cfg.BaseURL, "/")+"/"))
	}
	svc, err := fcmapi.NewService(ctx, opts...)
	if err != nil {
		return nil, providers.Errorf(Name, "config", "%v", err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &Client{project: cfg.ProjectID, svc: svc, timeout: timeout}, nil
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
	data[DataNotificationID], data[DataChannel], data[DataTenant] = tags.NotificationID, tags.Channel, tags.TenantID
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
		// Only a token problem kills the token; another invalid field is our bug.
		pe.DeadToken = tokenField || strings.Contains(strings.ToLower(msg), "registration token")
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
