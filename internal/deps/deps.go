//go:build deps

// Package deps pins the modules latscope's packages use while they are being
// built in parallel, so go.mod and go.sum stay complete. Remove once every
// module below is imported by real code.
package deps

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_model/go"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/prometheus/common/model"
	_ "github.com/spf13/cobra"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.opentelemetry.io/otel/trace"
	_ "go.opentelemetry.io/otel/propagation"
	_ "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	_ "go.opentelemetry.io/proto/otlp/trace/v1"
	_ "google.golang.org/protobuf/proto"
	_ "google.golang.org/protobuf/encoding/protojson"
)
