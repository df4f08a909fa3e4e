// node-redlock, the comparison for bench/lock_bench.sh.
// usage: node redlock_bench.js cycle   PORTS SECONDS           one client, acquire + release
//        node redlock_bench.js own     PORTS SECONDS           one contender, node-redlock retries
//        node redlock_bench.js caller  PORTS SECONDS           one contender, retries by the caller
// PORTS is a comma-separated list of Redis ports; prints "MODE acquisitions_per_second".
const Redis = require("ioredis");
const Redlock = require("redlock").default;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const retryDelay = 10;  // the same 10 +- 5 ms for both retry styles
const retryJitter = 5;

async function main() {
  const [mode, portList, secondsArg] = process.argv.slice(2);
  const clients = portList.split(",").map((p) => new Redis({ host: "127.0.0.1", port: Number(p) }));
  const redlock = new Redlock(clients, {
    retryCount: mode === "own" ? -1 : 0,
    retryDelay,
    retryJitter,
  });
  redlock.on("error", () => {});  // per-node refusals under contention
  await Promise.all(clients.map((c) => c.ping()));
  const resource = mode === "cycle" ? "redlock-bench-cycle" : "redlock-bench-contend";
  const limitNs = BigInt(Math.round(Number(secondsArg) * 1e9));
  const start = process.hrtime.bigint();
  let acquired = 0;
  while (process.hrtime.bigint() - start < limitNs) {
    let lock = null;
    while (lock === null && process.hrtime.bigint() - start < limitNs) {
      try {
        lock = await redlock.acquire([resource], 10000);
      } catch (e) {
        if (mode === "cycle") throw e;
        if (mode === "caller") await sleep(retryDelay + (Math.random() * 2 - 1) * retryJitter);
      }
    }
    if (lock === null) break;
    await lock.release().catch(() => {});
    acquired++;
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`${mode} ${Math.round(acquired / elapsed)}`);
  await redlock.quit();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
