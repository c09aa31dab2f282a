// Loaded into the service under test with `node --import ./bench/lib/service-probe.mjs` (only
// by the bench, never by the service itself). Every second it appends one JSON line to
// $BENCH_PROBE_FILE: memory by kind (V8 heap, external, array buffers) and the main thread's
// event-loop delay, which tells whether the main thread (API, activities, Temporal client) is
// saturated. Node also runs --import modules in
// worker threads (the Temporal workflow thread), so each line says which thread wrote it;
// rss is the whole process's, heap and external the thread's own isolate's. Processes the
// service forks with its node flags (the embedded database) load it too: each line has its pid.
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { isMainThread, threadId } from 'node:worker_threads';

const file = process.env.BENCH_PROBE_FILE;
if (file) {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let lastElu = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const memory = process.memoryUsage();
    const heap = getHeapStatistics();
    const elu = performance.eventLoopUtilization(lastElu);
    lastElu = performance.eventLoopUtilization();
    const mb = (bytes) => Math.round((bytes / 1024 / 1024) * 10) / 10;
    const line = {
      t: Date.now(),
      pid: process.pid,
      thread: isMainThread ? 'main' : `worker-${threadId}`,
      rss_mb: mb(memory.rss),
      heap_used_mb: mb(memory.heapUsed),
      heap_total_mb: mb(memory.heapTotal),
      external_mb: mb(memory.external),
      array_buffers_mb: mb(memory.arrayBuffers),
      malloced_mb: mb(heap.malloced_memory),
      // WebAssembly memories are not in the JS heap; they show in external (not in array buffers).
      event_loop_utilization: Math.round(elu.utilization * 1000) / 1000,
      event_loop_delay_ms: {
        p50: Math.round(delay.percentile(50) / 1e4) / 100,
        p99: Math.round(delay.percentile(99) / 1e4) / 100,
        max: Math.round(delay.max / 1e4) / 100,
      },
    };
    delay.reset();
    try {
      appendFileSync(file, `${JSON.stringify(line)}\n`);
    } catch {
      // the bench's temp dir is gone: stop probing
      clearInterval(timer);
    }
  }, 1000);
  timer.unref();
}
