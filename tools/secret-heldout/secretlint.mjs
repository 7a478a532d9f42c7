// Samples of secretlint's recommended rules, for the held-out secret corpus
// (scripts/install-secret-heldout.sh). secretlint's npm packages ship no test samples (their
// files are the built module, its sources, README and LICENSE), so the samples are made here:
// every regular expression a rule runs on a probe text is recorded, strings are generated from
// it (randexp, seeded), and a string is kept only when the rule itself, run through
// secretlint's own engine, reports it. These samples come from the rules' own expressions:
// they test the formats secretlint knows, not strings anyone wrote by hand. Two choices shape
// them: repetitions are capped at 200 (``{1,10000}`` gives at most 200), and a negated class
// (``[^@/\s]`` in a connection string's password) draws from letters, digits and ``-_.~!*+=``,
// the characters a URL carries unencoded; ``\s`` gives a space or a line feed.
//
// Prints one JSON line per kept sample: the rule, its message id, the expression, the text
// the rule was run on and the secret it reported; and one line per rule without any.
import { lintSource } from "@secretlint/core";
import { creator as preset } from "@secretlint/secretlint-rule-preset-recommend";
import RandExp from "randexp";

const PER_EXPRESSION = 3;
const TRIES = 60;
const MAX_REPEAT = 200;
const UNENCODED = "-_.~!*+=";
const NOT_DETECTORS = new Set(["@secretlint/secretlint-rule-filter-comments"]);

// mulberry32: a small seeded generator, so that the corpus is the same on every machine
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The expressions a rule runs, recorded by wrapping RegExp.prototype.exec (which matchAll,
// match, replace and test call once it is replaced).
const recorded = [];
const exec = RegExp.prototype.exec;
RegExp.prototype.exec = function (text) {
  recorded.push(this);
  return exec.call(this, text);
};

async function lint(rule, content, filePath = "/heldout/sample.txt") {
  const result = await lintSource({
    source: { filePath, content, contentType: "text" },
    options: { maskSecrets: false, config: { rules: [{ id: rule.meta.id, rule, options: {} }] } },
  });
  return result.messages;
}

// The expression without what randexp cannot generate: lookarounds (checked by the rule
// afterwards anyway) and group names.
function generable(source) {
  let out = "";
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    if (source.startsWith("\\s", i)) {
      out += inClass ? " \\n" : "[ \\n]";
      i++;
      continue;
    }
    if (source[i] === "\\") {
      out += source.slice(i, i + 2);
      i++;
      continue;
    }
    if (source[i] === "[" || source[i] === "]") {
      inClass = source[i] === "[";
      out += source[i];
      continue;
    }
    if (inClass) {
      out += source[i];
      continue;
    }
    const look = /^\(\?<?[!=]/.exec(source.slice(i));
    if (look) {
      let depth = 0;
      for (let j = i; j < source.length; j++) {
        if (source[j] === "\\") { j++; continue; }
        if (source[j] === "(") depth++;
        if (source[j] === ")" && --depth === 0) { i = j; break; }
      }
      continue;
    }
    const bound = /^\{(\d+),(\d+)\}/.exec(source.slice(i));
    if (bound && Number(bound[2]) > MAX_REPEAT) {
      out += `{${bound[1]},${Math.max(Number(bound[1]), MAX_REPEAT)}}`;
      i += bound[0].length - 1;
      continue;
    }
    const named = /^\(\?<([A-Za-z_]\w*)>/.exec(source.slice(i));
    if (named) {
      out += "(";
      i += named[0].length - 1;
      continue;
    }
    out += source[i];
  }
  return out;
}

function secretOf(message, content, expression, candidate) {
  const groups = new RegExp(expression.source, expression.flags.replace("g", "")).exec(candidate)?.groups;
  if (groups?.password) return groups.password;
  const values = Object.values(message.data ?? {}).filter((v) => typeof v === "string" && content.includes(v));
  values.sort((a, b) => b.length - a.length);
  return values[0] ?? content.slice(message.range[0], message.range[1]);
}

const out = (line) => process.stdout.write(JSON.stringify(line) + "\n");
let seed = 20261210;
for (const rule of preset.rules) {
  const id = rule.meta.id;
  if (NOT_DETECTORS.has(id)) continue;
  recorded.length = 0;
  await lint(rule, "probe: key=value token secret password\n");
  const expressions = [...new Map(recorded.map((r) => [`/${r.source}/${r.flags}`, r])).values()].filter(
    (r) => r.source !== "[\\r\\n\\u2028\\u2029]",
  );
  let kept = 0;
  for (const expression of expressions) {
    const generator = new RandExp(generable(expression.source), expression.flags.includes("i") ? "i" : "");
    const random = seeded(seed++);
    generator.randInt = (a, b) => a + Math.floor(random() * (b - a + 1));
    generator.max = 24;
    generator.defaultRange.subtract(0, 0x10ffff);
    generator.defaultRange.add(48, 57);
    generator.defaultRange.add(65, 90);
    generator.defaultRange.add(97, 122);
    for (const c of UNENCODED) generator.defaultRange.add(c.charCodeAt(0));
    const seen = new Set();
    for (let n = 0, found = 0; n < TRIES && found < PER_EXPRESSION; n++) {
      const candidate = generator.gen();
      if (seen.has(candidate)) continue;
      seen.add(candidate);
      const content = `value:\n${candidate}\n`;
      const messages = await lint(rule, content);
      const message = messages.find((m) => m.range[0] >= 7 && m.range[1] <= 7 + candidate.length);
      if (!message) continue;
      const secret = secretOf(message, content, expression, candidate);
      if (secret.length < 8) continue;
      found++;
      kept++;
      out({ rule: id, message: message.messageId, regex: expression.source, text: candidate, secret, generated: true });
    }
  }
  if (kept === 0) out({ rule: id, message: null, regex: null, text: null, secret: null, generated: true });
}
