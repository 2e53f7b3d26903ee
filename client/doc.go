// Package client is Herald's Go client: one method per operation of the REST API
// (api/openapi.yaml), typed requests and answers, errors as *Error, retries that
// are safe, pages as iterators, the live inbox as a channel and a verifier for
// Herald's outbound webhooks.
//
//	c, err := client.New("https://herald.example.com", os.Getenv("HERALD_KEY"))
//	sent, err := c.CreateNotification(ctx, client.CreateNotificationRequest{
//		UserID: "ada", TemplateID: "welcome", IdempotencyKey: client.Ptr("welcome-ada"),
//	})
//
// # Why it lives in Herald's module
//
// The package is github.com/herald-notify/herald/client, in the server's module
// rather than a module of its own, so that the client and the API document change
// in the same commit and are tested together: TestClientCoversOpenAPI fails when an
// operation in api/openapi.yaml has no method here, TestGeneratedTypesAreCurrent
// when types.gen.go lags the document, and the end-to-end tests run the calls
// against a real Herald (internal/apitest) in the same `go test ./...`. The cost to
// an application is small: the package imports only the standard library and the
// Standard Webhooks verifier, and Go builds only the packages an import reaches
// (the server's dependencies are listed in the module graph, not compiled). A module
// of its own would need a replace directive for cmd/herald, a second go.mod to tidy
// and a harness it could not import (internal/ packages are module-private).
//
// # Types
//
// types.gen.go is generated from the document by oapi-codegen (go generate
// ./client/, see generate.go and oapi-codegen.yaml); an optional field is a pointer
// (client.Ptr helps), a list or map is nil when absent. Bodies the document
// describes inline get short names in operations.go (CampaignPage, AuditLogPage...).
//
// # Errors
//
// Every non-2xx answer is an *Error carrying the HTTP status and Herald's error
// code, message and field ("steps[3].window"); match it with errors.As.
//
// # Retries and idempotency
//
// A call is retried with exponential backoff and jitter (Retries) when Herald
// answers 429 (after its Retry-After) or 503, and on network errors when repeating
// it cannot do anything twice: reads, PUTs and DELETEs, campaign controls, and
// sends. Every send carries an idempotency key: CreateNotification and
// CreateCampaign generate one when the caller gave none and reuse it on every retry,
// so a retried send is answered as a duplicate of the first (dedup "duplicate"),
// never sent twice. A generated key is random: two calls with identical content are
// two notifications (Herald's content-derived dedup applies only to requests
// without a key); give your own key (an order id) to dedup across calls.
// Other POSTs (create an API key, upload a list...) are retried only on 429 and
// 503, which Herald answers before doing anything.
//
// Every call takes a context; cancelling it stops the call and any backoff wait.
//
// # Pages, the inbox stream, webhooks
//
// List operations answer one page; their All... twins (AllCampaigns, AllInbox...)
// walk every page as an iter.Seq2. StreamInbox delivers the inbox's server-sent
// events on a channel and reconnects with Last-Event-ID by itself. WebhookVerifier
// checks the Standard Webhooks signature of Herald's status webhooks.
package client
