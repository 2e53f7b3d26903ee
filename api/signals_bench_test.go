package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/tracing"
)

// discardSpans is a span exporter that keeps nothing (the batching and the
// span work stay in the measurement; a collector's does not).
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkSignalsOverhead is what metrics and tracing add to one POST
// /v1/notifications, in process: the API's own middleware chain (access log
// with the request metrics and span naming, the submission counter, the
// tracing handler) around a handler that answers a new accept at once, so
// nothing but the signals is measured. "off" is the floor (no metrics, no
// tracer); "metrics" is herald's default; "all" samples and batches every span.
// Report the ratios metrics/off and all/off, and the absolute ns beside the
// accept path's latency (milliseconds: a Temporal start and PostgreSQL reads).
func BenchmarkSignalsOverhead(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	for _, mode := range []string{"off", "metrics", "all"} {
		b.Run(mode, func(b *testing.B) {
			var cfg Config
			tr := &tracing.Tracing{}
			if mode != "off" {
				cfg.Metrics = metrics.New(metrics.Options{})
			}
			if mode == "all" {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
				b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				tr.Provider = tp
			}
			s := New(nil, nil, cfg, slog.New(slog.DiscardHandler))
			n := &notificationsRoom{responder: s.mw.responder, metrics: cfg.Metrics}
			r := gin.New()
			r.Use(s.mw.accessLog)
			r.POST("/v1/notifications", func(c *gin.Context) { c.Set(tenantKey, store.Tenant{ID: "t_bench"}) }, n.countSubmission,
				func(c *gin.Context) {
					c.Set(acceptLaneKey, "normal")
					n.answerAccept(c, acceptNew, http.StatusAccepted, gin.H{"notification_id": "n_bench", "status": "queued", "dedup": "new"})
				})
			h := tr.Handler(r)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/notifications", nil))
				if rec.Code != http.StatusAccepted {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}
