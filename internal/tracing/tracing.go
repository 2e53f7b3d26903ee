// Package tracing sets up OpenTelemetry for Herald: one trace from POST
// /v1/notifications through the workflow and each activity to the provider
// HTTP call. The API's handler starts the server span (otelhttp), Temporal's
// OpenTelemetry interceptor carries the context through the workflow start into
// the workflow and its activities (in Temporal headers), and otelhttp's
// transport on the provider clients (around the egress policy's transport, so
// the policy still decides every connection) makes the client span and sends
// traceparent.
//
// Traces are exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, with the exporter's standard
// OTEL_* variables; otherwise tracing is off: Tracing.Enabled is false, no
// interceptor, handler or transport wrapper is installed, and the cost is one
// nil check per request.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TracerName names Herald's own spans' instrumentation scope.
const TracerName = "github.com/herald-notify/herald"

// Tracing is the process's tracer provider; the zero value (and nil) is off.
type Tracing struct {
	// Provider makes the spans; nil: tracing is off.
	Provider trace.TracerProvider
}

// Propagator is how trace context crosses HTTP (W3C traceparent/tracestate)
// and Temporal headers.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Enabled reports whether spans are made.
func (t *Tracing) Enabled() bool { return t != nil && t.Provider != nil }

// EnvEnabled reports whether the environment asks for OTLP export.
func EnvEnabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns the OTLP-exporting Tracing when EnvEnabled, else the off
// one; shutdown flushes the spans still batched (call it on exit).
func FromEnv(ctx context.Context, service string) (*Tracing, func(context.Context) error, error) {
	if !EnvEnabled() {
		return &Tracing{}, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp}, tp.Shutdown, nil
}

// TemporalInterceptors are the client interceptors that trace workflow starts,
// workflows and activities (nil when off).
func (t *Tracing) TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if !t.Enabled() {
		return nil, nil
	}
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: t.Provider.Tracer(TracerName), TextMapPropagator: Propagator,
		// Queries (status reads) would make a trace per poll; the notification's
		// trace is about delivery.
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{i}, nil
}

// Handler wraps the API handler with a server span per request, continuing a
// trace the caller sent in traceparent. The span is named by the route
// template once gin matched it (see api's accessLog).
func (t *Tracing) Handler(h http.Handler) http.Handler {
	if !t.Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, "http.request", otelhttp.WithTracerProvider(t.Provider), otelhttp.WithPropagators(Propagator))
}

// Transport wraps a provider client's transport with a client span per
// request and traceparent on the request; rt still dials (the egress policy).
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	if !t.Enabled() {
		return rt
	}
	return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(t.Provider), otelhttp.WithPropagators(Propagator))
}
