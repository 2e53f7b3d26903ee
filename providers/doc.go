// Package providers is Herald's provider layer: one small sender interface per
// channel (EmailSender, SMSSender, PushSender), the message types they take, the
// Tags that name the notification a call belongs to, one error type (*Error) that
// classifies every failure as retryable or permanent, provider-neutral delivery
// Receipts, and Store, the pgx store for provider_configs (credentials sealed with
// internal/secrets), push_tokens and provider_receipts.
//
// Implementations live in subpackages: sendgrid and smtp (email), twilio (SMS),
// fcm (push), sandbox (records instead of sending; the default for a tenant
// without credentials). Each describes itself with a Definition: its channels,
// the validation of a tenant's config (refusals are *FieldError, named by
// field), how a sender is built from a stored config, and its Webhook when it
// posts receipts. Package registry lists them in a Registry; the API and the
// resolver (which keeps one sender per config version) only go through it.
// Every connection a sender makes goes through the egress policy
// (internal/egress, Env.Egress): internal addresses are refused at dial time
// unless the operator allowed them, redirects are not followed, and Error
// shows at most MaxReasonBytes of a provider's answer (SafeText).
// providertest holds wire-level fakes of all three providers and ContractServer,
// which validates requests in process against the providers' own OpenAPI specs
// (vendored in providers/testdata) for the contract tests.
//
// # Using a sender (the Layer-2 delivery guard)
//
//  1. If deliveries says (notification_id, channel) is sent, or Store.LatestReceipt
//     finds any receipt for it, do not call the provider.
//  2. Call Send…(ctx, msg, tags.IdempotencyKey(), tags).
//  3. Only after it returned a Result, record sent + Result.ProviderMessageID.
//
// On error: IsPermanent(err) → the channel is failed with the Error's Reason, no
// retry (and IsDeadToken(err) → Store.RemoveDeadPushToken). Otherwise retry with
// backoff, waiting at least RetryAfter(err). A 2xx from a provider is always a
// Result, never an error, even if the response could not be read: the provider has
// the message, and an error would send it again.
//
// # Provider-side idempotency (what each provider offers)
//
// SendGrid (v3 Mail Send): no idempotency key. The published OpenAPI document
// (twilio/sendgrid-oai, tsg_mail_v3.json, vendored as
// providers/testdata/sendgrid_mail_v3.json) defines no Idempotency-Key header or
// field for POST /v3/mail/send; its only header parameter is Content-Encoding. A
// repeated request is a second email. Herald tags each message with personalization
// custom_args {notification_id, channel, tenant}, which SendGrid copies into every
// Event Webhook event, and keeps the X-Message-Id of the 202 (events carry it as
// the prefix of sg_message_id). Message-level custom_args are typed string in the
// spec (the SDK would send an object), so the tags go on the personalization.
// Sources: the spec above; SendGrid docs "X-Message-ID" glossary
// (https://www.twilio.com/docs/sendgrid/glossary/x-message-id) and Event Webhook
// reference; github.com/sendgrid/sendgrid-go v3.16.1 (no idempotency support).
//
// Twilio (Messages, POST /2010-04-01/Accounts/{AccountSid}/Messages.json): no
// documented idempotency key. twilio_api_v2010.json (twilio/twilio-oai, vendored
// in providers/testdata) defines no
// such header or parameter for Messages create; twilio-go v1.31.0's
// CreateMessageParams has none (it sends Idempotency-Key only for a few newer APIs,
// e.g. voice v3 transcriptions). I-Twilio-Idempotency-Token is real but is a header
// Twilio sends on its webhook requests so the receiver can spot Twilio's retries
// (https://www.twilio.com/docs/usage/webhooks/webhooks-connection-overrides);
// twilio.Config.IdempotencyHeader can send it on create, unrelied upon. Herald puts
// the tags in the StatusCallback URL, so every status callback names the
// notification, and keeps the MessageSid.
//
// FCM (HTTP v1 projects.messages.send): no idempotency key; each call is a new
// message with a new name. Herald derives collapse ids from the key
// (android.notification.tag, apns-collapse-id, webpush Topic) so a duplicate
// replaces the first on the device (not android.collapse_key: FCM keeps at most
// four per device, so one per notification could drop messages), and adds herald_notification_id to
// the data so the app can drop one. FCM sends no delivery receipts back. The
// Firebase Admin SDK (firebase.google.com/go/v4) retries network errors and 503s
// inside Send (up to 4 times, Retry-After up to 2 min), which can itself
// double-send; package fcm uses google.golang.org/api/fcm/v1, one request per
// call. Sources: https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages,
// firebase.google.com/go/v4@v4.19.0 internal/http_client.go (WithDefaultRetryConfig).
//
// # What can still double-send
//
// No provider offers a key, so the window "provider accepted → worker died (or the
// response was lost) → Herald did not record it" can send twice. It is closed when
// a receipt naming the notification (SendGrid event, Twilio status callback)
// reaches provider_receipts before the retry checks; for push only the collapse
// ids soften it. A timeout is always retryable: the request may or may not have
// reached the provider, and a rare double beats a silent loss.
package providers
