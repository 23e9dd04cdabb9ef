package main

import (
	"io"

	"github.com/latscope/latscope/session"
)

// sessionOptions turns the flags into the session's options
// (session.Spec checks them).
func (f *loadFlags) sessionOptions(stderr io.Writer, target string) (session.Options, error) {
	return session.Spec{
		Target: target, Dialect: f.dialect, Model: f.model, APIKey: f.apiKey, Headers: f.headers, CACert: f.caCert, Insecure: f.insecure,
		HTTP2: f.http2, H2C: f.h2c, Connections: f.connections,
		Concurrency: f.concurrency, Rate: f.rate, Arrival: f.arrival, Burstiness: f.burstiness,
		Duration: f.duration, Requests: f.requests, Warmup: f.warmup, Drain: f.drain, UntilStopped: f.untilStopped,
		PromptTokens: f.promptTokens, OutputTokens: f.outputTokens, PromptFile: f.promptFile, SharedPrefix: f.sharedPrefix,
		Conversation: f.conversation, CancelAfter: f.cancelAfter, Timeout: f.timeout, MaxEventBytes: f.maxEventBytes,
		Seed: f.seed.Value(), SeedDrawn: f.seed.Drawn(), Shard: f.shard, StartAt: f.startAt,
		Steps: f.steps, StepDuration: f.stepDuration, RepeatSteps: f.repeatSteps, Trace: f.trace, TraceSpeed: f.traceSpeed,
		SLO: f.slo, TTFTBasis: f.ttftBasis, FlushTimeout: f.flushTimeout,
		MetricsURL: f.metricsURL, NoMetrics: f.noMetrics, ScrapeInterval: f.scrapeInterval, OTLPListen: f.otlpListen, JoinWait: f.joinWait,
		GPUDevices: f.gpuDevices, GPUMetricsURLs: f.gpuMetricsURLs, GPUInterval: f.gpuInterval, NoGPU: f.noGPU,
		Version: version,
	}.Options(stderr)
}
