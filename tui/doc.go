// Package tui is latscope's live dashboard: a full-screen Bubble Tea
// program that shows where every millisecond of an LLM streaming request
// goes, for a live run, a replayed recording or several remote agents.
//
// # Wiring
//
// The screen has one input, a [Feed]: Frame returns the newest data and a
// version. [LiveFeed] is the live run's (the aggregator's snapshots from a
// pipeline.Latest, with the request sample the requests view lists); a
// replay's, [ReplayFeed], implements [Pauser] and [Seeker] as
// well and sets Frame.Playback (each seek starts a [ReplayPass] the caller
// builds); a sweep's, [SweepFeed], sets Frame.Sweep; [WithNotices] adds a
// [NoticeBoard]'s lines, what would otherwise print on stderr, to any
// feed; and an attach feed to several agents fills Frame.Agents
// with one frame per agent, the frame itself being the fleet's. A feed
// sets Frame.Finished once its session has ended. [Run] shows the
// dashboard until the user quits or its context ends:
//
//	snaps := pipeline.NewLatest[aggregate.Snapshot]()      // the aggregator Puts every snapshot
//	feed := tui.NewLiveFeed(snaps)
//	err := tui.Run(ctx, feed, tui.Options{Objectives: slo, Window: aggregate.Win1m})
//	// the user quit (q, Ctrl-C) or ctx ended: stop measuring, print the summary
//
// The screen reads the feed on its own 10 Hz tick and redraws only when
// the frame, the size or a key changed, so it never slows measuring; the
// charts' history lives in the model in fixed memory.
//
// # Reading the dashboard
//
// The header says what is measured (target, server, dialect, model, load,
// elapsed time, the window and statistic shown) and whether every source
// is healthy: the probe (latscope's own CPU and scheduling lag), the
// metrics scrape, the OTLP join and NVML, each with ✓ or ✗. A red line
// below names whatever is in trouble, with the figure: "LATSCOPE IS THE
// LIMIT" means latscope, not the server, is the bottleneck and latencies
// include its own delay. SIMULATED marks a simulated server or GPU, and
// nothing else.
//
// The bar splits the time to first token by stage, in the order a request
// crosses them: client stages, network out, tokenize, queue, prefill,
// first decode, network return, unattributed. Its title says what it
// shows and how long it is. With s it shows the mean, or the band of
// requests around p50, p90 or p99 (p99: the slowest 1%): a band's stages
// add up to the band's TTFT, which per-stage percentiles would not. The
// legend gives each stage's milliseconds and share; ~ marks estimated
// stages. Below it, the whole request: TTFT, then decode (the tokens, and
// the gaps between them × time per gap). Attached to several agents, a table gives each agent's load,
// rate, TTFT p50/p99, errors and health; a cycles the fleet (every agent's
// requests in one aggregate) and each agent. Without colour, segments are told apart by letters (q
// queue, p prefill, ...; see the help page).
//
// The table gives count, mean, p50, p90, p99 and max of TTFT, ITL, TPOT,
// E2E and every breakdown stage over the window (w: 10 s, 1 min, 5 min,
// whole run), with where each stage's numbers came from (measured, server,
// estimated); a broken SLO is red (or marked "!"). The charts beside it
// show, second by second, the 10 s p50 and p99 of TTFT and ITL with the
// SLO limit, the queue (server waiting and running, probe in flight) and
// output tokens per second. The GPU panel shows each GPU's utilisation and
// memory with short histories, power, temperature, clock and throttle
// reasons. Markers list, newest first, the current insights, stalls, gaps,
// Nagle suspects, error bursts and SLO breaches that lasted a whole window,
// each with its time since the session started and its evidence.
//
// tab opens the requests view: the window's slowest requests and the
// latest ones; enter opens one request's waterfall, every stage on one time
// axis with its provenance, then each token's arrival along the decode.
// / filters the requests. The mouse wheel scrolls them, a click selects
// one and a second opens it; a click on a legend entry picks its stage
// across the screen. p pauses the screen (measuring goes on), ? shows
// every key.
//
// The layout does not move as data comes and goes: the header is three
// lines, the legend has rows reserved by height (entries shorten, then the
// smallest fold into "+N more"), and the stage table's room only grows. As
// the terminal shrinks the charts go first, then the GPU histories; the
// header keeps the load, the time and the help hint, and the footer ? and q.
//
// The main view at 120×40, from a synthetic session, without colour:
//
//	 latscope ▸ http://gpu-7:8000  vllm · openai-chat · llama-3-8b   closed loop c=16   00:02:30   [1m] mean          ? help
//	 ok 20.4 req/s   1303 tok/s   errors 1.2%   in flight 16   probe ✓ cpu 21% lag 0.30 ms  scrape ✓  otlp ✓  nvml ✓
//
//	─ TTFT breakdown · 1m · mean of 1018 requests · 182 ms ─────────────────────────────────────────────────────────────────
//	 ▕ttttttqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqpppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppffffu▏
//	  l lag 0.05 0%   z serialize 0.12 0%   w write 0.04 0%   n net out~ 0.50 0%   t tokenize 9.02 5%   q queue 68.8 38%
//	  p prefill 95.3 52%   f 1st dec 6.04 3%   r net back~ 0.50 0%   u unattrib~ 1.50 1%
//	─ whole request · 1.57 s = TTFT 182 ms + decode 1.39 s (64 tokens: 63 gaps × 22.1 ms) ──────────────────────────────────
//	 ▕TTTTTTTTTTTTT-------------------------------------------------------------------------------------------------------▏
//	 stages (1m, ms)            count   mean    p50    p90    p99    max│TTFT ms  ━ p50 283  ━ p99 342  ━ SLO 400
//	 ttft           measured     1018    182    160    283    330    777│500│⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀
//	 itl            measured    64134   22.0   22.0   25.6   26.4   41.0│   │                                     ⣀⣀⣀⠤⠤⠤⢤⣤⣒⣒
//	 tpot           measured     1018   22.1   22.1   22.5   22.9   23.1│250│⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣠⣤⣤⣤⣤⣤⣤⡤⠶⠶⠶⠶⠭⠝⠛⠛⠒⠊⠉⠉⠉⠉⠁
//	 ...
package tui
