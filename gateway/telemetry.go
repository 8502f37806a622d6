package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/airlockgw/airlock/deploy/securefile"
	"github.com/airlockgw/airlock/gateway/config"
)

// tracing is the OpenTelemetry side of the telemetry block: a tracer
// provider that batches spans and sends them over OTLP/HTTP.
type tracing struct {
	tp   *sdktrace.TracerProvider
	once sync.Once
	err  error
}

// maxTokenFile bounds what is read of telemetry.otlp_token_file.
const maxTokenFile = 64 << 10

// newTracing builds the tracer provider for t, or returns nil when no
// OTLP endpoint is configured (tracing off: the engine makes no spans).
func newTracing(t *config.Telemetry, log hclog.Logger) (*tracing, error) {
	if t == nil || t.OTLPEndpoint == "" {
		return nil, nil
	}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(strings.TrimSuffix(t.OTLPEndpoint, "/") + "/v1/traces"),
		otlptracehttp.WithTimeout(10 * time.Second),
	}
	if t.OTLPTokenFile != "" {
		// A credential: owned by the gateway's user, read by it alone.
		tok, err := securefile.ReadToken(t.OTLPTokenFile, maxTokenFile)
		if err != nil {
			return nil, fmt.Errorf("telemetry.otlp_token_file: %w", err)
		}
		opts = append(opts, otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	}
	if t.OTLPCAFile != "" {
		pool, err := config.LoadCertPool(t.OTLPCAFile)
		if err != nil {
			return nil, fmt.Errorf("telemetry.otlp_ca_file: %w", err)
		}
		opts = append(opts, otlptracehttp.WithTLSClientConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	// Creating the exporter dials nothing: a collector that is down costs
	// dropped spans (logged by the SDK), never an action.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", t.ServiceName), attribute.String("service.version", Version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(t.SampleRatio)),
	)
	// The SDK's own errors (a collector that is down, say) go to the
	// gateway's log, not to stderr.
	tlog := log.Named("tracing")
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { tlog.Warn("sending traces", "error", err) }))
	log.Info("tracing actions", "otlp_endpoint", t.OTLPEndpoint, "sample_ratio", t.SampleRatio)
	return &tracing{tp: tp}, nil
}

// tracer is nil when tracing is off.
func (t *tracing) tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.tp.Tracer("github.com/airlockgw/airlock/gateway")
}

// shutdown sends the spans still batched, within ctx.
func (t *tracing) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.once.Do(func() { t.err = t.tp.Shutdown(ctx) })
	return t.err
}
