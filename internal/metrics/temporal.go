package metrics

import (
	"log/slog"

	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// TemporalHandler is the Temporal SDK's metrics handler (client.Options
// MetricsHandler) exporting into this registry: worker task slots, poll and
// schedule-to-start latencies, activity and workflow task outcomes, sticky
// cache, all labelled by the SDK with namespace, task queue (a lane each) and
// type (temporal_* in the exposition). The SDK ships an OpenTelemetry handler
// (contrib/opentelemetry); the OpenTelemetry Prometheus exporter bridges it
// into client_golang. Nil m: the SDK's no-op handler.
func (m *Metrics) TemporalHandler() client.MetricsHandler {
	if m == nil {
		return client.MetricsNopHandler
	}
	m.temporalOnce.Do(func() {
		exp, err := otelprom.New(otelprom.WithRegisterer(m.Registry), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
		if err != nil {
			slog.Warn("Temporal SDK metrics are off: the Prometheus bridge failed", "error", err)
			m.temporal = client.MetricsNopHandler
			return
		}
		// Seconds, not the OpenTelemetry default buckets (which assume milliseconds).
		secs := sdkmetric.NewView(sdkmetric.Instrument{Name: "*", Kind: sdkmetric.InstrumentKindHistogram},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
				Boundaries: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}})
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(secs))
		m.temporal = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter: mp.Meter("temporal-sdk-go"), UseMonotonicCounters: true,
			OnError: func(err error) { slog.Warn("Temporal SDK metric", "error", err) },
		})
	})
	return m.temporal
}
