// node-redlock, the comparison for bench/lock_bench.sh.
// usage: node redlock_bench.js cycle   PORTS SECONDS [START_AT_MS]   one client, acquire + release
//        node redlock_bench.js own     PORTS SECONDS [START_AT_MS]   one contender, node-redlock retries
//        node redlock_bench.js caller  PORTS SECONDS [START_AT_MS]   one contender, retries by the caller
// PORTS is a comma-separated list of Redis ports on 127.0.0.1. START_AT_MS: wall-clock time (ms
// since the epoch) to start at, so that contenders measure the same window. `cycle` first runs
// 100 untimed cycles (script loading, JIT), as lock_bench does.
// Prints, like lock_bench: "MODE PER_SECOND cycles=N seconds=S p50_us=P p99_us=P failures=F".
const Redis = require("ioredis");
const Redlock = require("redlock").default;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const retryDelay = 10;  // the same 10 +- 5 ms for both retry styles
const retryJitter = 5;
const ttl = 10000;

async function main() {
  const [mode, portList, secondsArg, startAtArg] = process.argv.slice(2);
  if (!["cycle", "own", "caller"].includes(mode) || !portList || !(Number(secondsArg) > 0)) {
    console.error("usage: node redlock_bench.js cycle|own|caller PORTS SECONDS [START_AT_MS]");
    process.exit(2);
  }
  const clients = portList.split(",").map((p) => new Redis({ host: "127.0.0.1", port: Number(p) }));
  const redlock = new Redlock(clients, {
    retryCount: mode === "own" ? -1 : 0,
    retryDelay,
    retryJitter,
  });
  redlock.on("error", () => {});  // per-node refusals under contention
  await Promise.all(clients.map((c) => c.ping()));
  const resource = mode === "cycle" ? "redlock-bench-cycle" : "redlock-bench-contend";

  if (mode === "cycle") {
    for (let i = 0; i < 100; i++) {
      const lock = await redlock.acquire([resource], ttl);
      await lock.release();
    }
  }
  if (startAtArg) await sleep(Math.max(0, Number(startAtArg) - Date.now()));

  const limitNs = BigInt(Math.round(Number(secondsArg) * 1e9));
  const start = process.hrtime.bigint();
  const latenciesUs = [];
  let failures = 0;
  let t = start;
  while (process.hrtime.bigint() - start < limitNs) {
    let lock = null;
    while (lock === null && process.hrtime.bigint() - start < limitNs) {
      try {
        lock = await redlock.acquire([resource], ttl);
      } catch (e) {
        if (mode === "cycle") throw e;
        if (mode === "caller") await sleep(retryDelay + (Math.random() * 2 - 1) * retryJitter);
      }
    }
    if (lock === null) break;
    try {
      await lock.release();
    } catch (e) {
      failures++;
    }
    const now = process.hrtime.bigint();
    latenciesUs.push(Number(now - t) / 1e3);
    t = now;
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  latenciesUs.sort((a, b) => a - b);
  const pct = (p) =>
    latenciesUs.length ? latenciesUs[Math.min(latenciesUs.length - 1, Math.floor(p * latenciesUs.length))] : 0;
  console.log(
    `${mode} ${Math.round(latenciesUs.length / elapsed)} cycles=${latenciesUs.length} ` +
      `seconds=${elapsed.toFixed(3)} p50_us=${Math.round(pct(0.5))} p99_us=${Math.round(pct(0.99))} ` +
      `failures=${failures}`
  );
  await redlock.quit();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
