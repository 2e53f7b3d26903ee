package api_test

import (
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/tracing"
)

// TestOneTracePerNotification: with tracing on (an in-memory exporter), one
// notification's spans (the API request, the workflow start, the workflow
// run, its activities and the provider's HTTP call) share one trace id, which
// is also the traceparent SendGrid received; a second notification gets a
// trace of its own.
func TestOneTracePerNotification(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	f := apitest.StartFakes(t)
	h := apitest.Start(t, apitest.Options{Process: f.Process(publicBase, 10*time.Second), Tracing: &tracing.Tracing{Provider: tp}})
	tenantID, key := h.TenantWith("traces", "order")
	h.ConfigureSendGrid(tenantID, `{"from":"shop@example.com"}`)
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})

	// A dedup window of 1 s lets the workflow (and so its span) end.
	submit := func() string {
		return h.Accept(key, map[string]any{"user_id": "ada", "template_id": "order", "channels": []string{"email"},
			"idempotency_key": freshKey("trace"), "dedup_ttl_sec": 1})
	}
	id := submit()
	h.AwaitChannel(key, id, "email", "sent", "", 10*time.Second)

	find := func(pred func(tracetest.SpanStub) bool) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			if pred(s) {
				out = append(out, s)
			}
		}
		return out
	}
	named := func(name string) func(tracetest.SpanStub) bool {
		return func(s tracetest.SpanStub) bool { return s.Name == name }
	}
	h.Eventually(15*time.Second, "the workflow span to end", func() bool {
		return len(find(named("RunWorkflow:NotificationWorkflow"))) > 0
	})
	api := find(named("POST /v1/notifications"))
	if len(api) != 1 || api[0].SpanKind != trace.SpanKindServer {
		t.Fatalf("API spans: %d %v", len(api), names(exp.GetSpans()))
	}
	traceID := api[0].SpanContext.TraceID()
	inTrace := find(func(s tracetest.SpanStub) bool { return s.SpanContext.TraceID() == traceID })
	for _, want := range []string{"StartWorkflow:NotificationWorkflow", "RunWorkflow:NotificationWorkflow",
		"StartActivity:DeliverEmail", "RunActivity:DeliverEmail", "RunActivity:RecordAccepted"} {
		if len(filter(inTrace, named(want))) == 0 {
			t.Errorf("no %s span in the notification's trace; it has %v", want, names(inTrace))
		}
	}
	clients := filter(inTrace, func(s tracetest.SpanStub) bool {
		return s.SpanKind == trace.SpanKindClient && strings.Contains(s.Name, "POST")
	})
	if len(clients) != 1 {
		t.Fatalf("provider HTTP client spans in the trace: %d (%v)", len(clients), names(inTrace))
	}
	// The provider call is a child of the delivery activity.
	act := filter(inTrace, named("RunActivity:DeliverEmail"))
	if len(act) > 0 && clients[0].Parent.SpanID() != act[0].SpanContext.SpanID() {
		t.Errorf("the provider call's parent is %s, not the DeliverEmail activity", clients[0].Parent.SpanID())
	}
	reqs := f.SendGrid.AcceptedRequests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Header.Get("Traceparent"), traceID.String()) {
		t.Errorf("SendGrid got traceparent %q, want trace %s", reqs[0].Header.Get("Traceparent"), traceID)
	}

	other := submit()
	h.AwaitChannel(key, other, "email", "sent", "", 10*time.Second)
	apis := find(named("POST /v1/notifications"))
	if len(apis) != 2 || apis[1].SpanContext.TraceID() == traceID {
		t.Errorf("the second notification is not a trace of its own: %d API spans", len(apis))
	}
}

func filter(spans []tracetest.SpanStub, pred func(tracetest.SpanStub) bool) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if pred(s) {
			out = append(out, s)
		}
	}
	return out
}

func names(spans []tracetest.SpanStub) []string {
	out := make([]string, 0, len(spans))
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
