// Runs an exported graph in onnxruntime (npm onnxruntime-node, CPU): node run_onnx.js MODEL.onnx BATCH.json
// [STATE_MODEL.onnx]. Feeds every sequence of BATCH.json (tests/export/onnx_batch.py) at once, unequal
// lengths in file order, and compares the log-probabilities with rnn_dist's within 1e-4. With a second
// graph exported with --state (a language model), also feeds the batch's sequences cut to a common
// length in two halves, carrying final_h/final_c into the second, which must give the whole run's outputs
// and final states within 1e-5. Prints one line; exits 1 when a check fails.
const ort = require('onnxruntime-node');
const fs = require('fs');

function feeds(inputs, steps) {
  const B = inputs.length;
  const T = steps || Math.max(...inputs.map((s) => s.length));
  const tokens = new BigInt64Array(T * B);  // time-major, padded with 0
  const lens = new Int32Array(B);
  inputs.forEach((s, b) => {
    lens[b] = Math.min(s.length, T);
    for (let t = 0; t < lens[b]; ++t) tokens[t * B + b] = BigInt(s[t]);
  });
  return { tokens: new ort.Tensor('int64', tokens, [T, B]), sequence_lens: new ort.Tensor('int32', lens, [B]) };
}

function maxDiff(a, b) {
  let worst = 0;
  for (let i = 0; i < a.length; ++i) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

async function main() {
  const [modelPath, batchPath, statePath] = process.argv.slice(2);
  const batch = JSON.parse(fs.readFileSync(batchPath, 'utf8'));
  const session = await ort.InferenceSession.create(modelPath);
  const out = await session.run(feeds(batch.inputs));
  const lp = out.log_probs;
  const B = batch.inputs.length;
  let worst = 0;
  batch.inputs.forEach((s, b) => {
    const want = batch.expected[b];
    let got;
    if (batch.task === 'classify') {
      const C = lp.dims[1];
      got = Array.from(lp.data.subarray(b * C, (b + 1) * C));
    } else {
      const O = lp.dims[2];
      got = batch.targets[b].map((target, t) => lp.data[(t * B + b) * O + target]);
    }
    if (got.length !== want.length) throw new Error(`sequence ${b}: ${got.length} values, rnn_dist ${want.length}`);
    worst = Math.max(worst, maxDiff(got, want));
  });
  let line = `${batch.task}: ${B} sequences of ${Math.min(...batch.inputs.map((s) => s.length))} to ` +
    `${Math.max(...batch.inputs.map((s) => s.length))} tokens in one batch, max |log p difference| ` +
    `${worst.toExponential(2)}`;
  let ok = worst <= 1e-4;
  // Each valid row is a whole distribution over the outputs (the adaptive softmax's too): |log sum exp| small.
  let mass = 0;
  const O = lp.dims[lp.dims.length - 1];
  batch.inputs.forEach((s, b) => {
    const rows = batch.task === 'classify' ? [b] : s.map((_, t) => t * B + b);
    for (const r of rows) {
      let sum = 0;
      for (let j = 0; j < O; ++j) sum += Math.exp(lp.data[r * O + j]);
      mass = Math.max(mass, Math.abs(Math.log(sum)));
    }
  });
  line += `, max |log of a row's probability mass| ${mass.toExponential(2)}`;
  ok = ok && mass <= 1e-5;
  if (statePath) {
    const K = 12, K1 = 5;
    const longer = batch.inputs.filter((s) => s.length >= K);
    const state = await ort.InferenceSession.create(statePath);
    const Bs = longer.length;
    const zeros = () => new ort.Tensor('float32', new Float32Array(out.final_h.dims[0] * Bs * out.final_h.dims[2]),
                                       [out.final_h.dims[0], Bs, out.final_h.dims[2]]);
    const whole = await state.run({ ...feeds(longer, K), initial_h: zeros(), initial_c: zeros() });
    const first = await state.run({ ...feeds(longer, K1), initial_h: zeros(), initial_c: zeros() });
    const second = await state.run({ ...feeds(longer.map((s) => s.slice(K1)), K - K1), initial_h: first.final_h,
                                     initial_c: first.final_c });
    const tail = whole.log_probs.data.subarray(K1 * Bs * whole.log_probs.dims[2]);
    const streamed = Math.max(maxDiff(second.log_probs.data, tail), maxDiff(second.final_h.data, whole.final_h.data),
                              maxDiff(second.final_c.data, whole.final_c.data));
    line += `; ${Bs} sequences streamed as ${K1} + ${K - K1} steps with the state carried: max difference ` +
      `${streamed.toExponential(2)}`;
    ok = ok && streamed <= 1e-5;
  }
  console.log(line);
  process.exit(ok ? 0 : 1);
}

main().catch((e) => { console.log(`error: ${e.message}`); process.exit(1); });
