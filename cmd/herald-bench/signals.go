package main

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/herald-notify/herald/internal/tracing"
)

var signalsNote = map[string]string{
	"off":     "no metrics recorded, no Temporal SDK metrics handler, no tracing",
	"metrics": "Prometheus metrics and the Temporal SDK's metrics handler on; tracing off (herald's default)",
	"all":     "metrics on, and every request traced (all spans sampled, batched, exported)",
}

// benchTracing is -signals all: OTLP when the environment names an endpoint,
// else every span sampled and batched as in production, into an exporter that
// drops them (the cost measured is Herald's, not a collector's).
func benchTracing(ctx context.Context) (*tracing.Tracing, func(context.Context) error, error) {
	if tracing.EnvEnabled() {
		return tracing.FromEnv(ctx, "herald-bench")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	return &tracing.Tracing{Provider: tp}, tp.Shutdown, nil
}

// discard is a span exporter that keeps nothing.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

var _ sdktrace.SpanExporter = discard{}
