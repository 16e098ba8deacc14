#!/usr/bin/env node
// Splits a set of tricky texts with Hugging Face `tokenizers` (the Rust library, through its Node
// bindings: Oniguruma regexes and HF's own Split / Digits / Punctuation / ByteLevel pre-tokenizers) and
// stores the pieces for tests/pretokenizer_test.cpp, which checks polykv's PCRE2 pre-tokenizers against
// them. Nothing here shares code with polykv: the patterns below are written as the models'
// tokenizer.json files state them (case-insensitive groups, possessive quantifiers, class intersection),
// where polykv writes its own PCRE2 forms.
//
// Run (needs network once for the npm package; the output is checked in):
//   mkdir -p /tmp/hf && (cd /tmp/hf && npm install tokenizers@0.23.2)
//   NODE_PATH=/tmp/hf/node_modules node tools/pretokenizer_refs.js > tests/data/pretokenizer/hf_splits.json
//
// Output: {"generator", "texts": [...], "types": {type: {"names": [...], "escape_whitespace": bool,
//          "source": text, "splits": [[piece, ...] per text]}}}. `names` are the tokenizer.ggml.pre values of
// that type as llama.cpp's vocabulary loader lists them (its table is the index of names; the patterns'
// source is each model's tokenizer.json). escape_whitespace: the text was split after every ' ' became
// U+2581 (those vocabularies run BPE on raw UTF-8 with SentencePiece-style spaces).
'use strict';
const hf = require('tokenizers');

const split = (regex, behavior = 'Isolated') =>
  ({type: 'Split', pattern: {Regex: regex}, behavior, invert: false});
const seq = (...list) => ({type: 'Sequence', pretokenizers: list});
const byteLevelRegex = {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true};
const digits = (individual) => ({type: 'Digits', individual_digits: individual});

const C = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
const U = '[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]';  // o200k's "upper-ish" class
const L = '[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]';         // o200k's "lower-ish" class
const o200k = (num) => `[^\\r\\n\\p{L}\\p{N}]?${U}*${L}+${C}?|[^\\r\\n\\p{L}\\p{N}]?${U}+${L}*${C}?|${num}` +
    '| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+';
const llama3 = `${C}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const qwen2 = `${C}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;
const gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const dsv3 = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+" +
    '| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+';
const cjkV3 = '[\\u4E00-\\u9FA5\\u3040-\\u309F\\u30A0-\\u30FF]+';
const cjkCoder = '[\\u4E00-\\u9FA5\\u0800-\\u4E00\\uAC00-\\uD7FF]+';
const bloom = ' ?[^(\\s|[.,!?\\u2026\\u3002\\uFF0C\\u3001\\u0964\\u06D4\\u060C])]+';
// DeepSeek LLM's letters: the cased letters its tokenizer.json lists one range at a time.
const dsLetters = 'A-Za-z\\u00B5\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u01BA\\u01BC-\\u01BF\\u01C4-\\u0293' +
    '\\u0295-\\u02AF\\u0370-\\u0373\\u0376\\u0377\\u037B-\\u037D\\u037F\\u0386\\u0388-\\u038A\\u038C\\u038E-\\u03A1' +
    '\\u03A3-\\u03F5\\u03F7-\\u0481\\u048A-\\u052F\\u0531-\\u0556\\u10A0-\\u10C5\\u13A0-\\u13F5\\u13F8-\\u13FD' +
    '\\u1C90-\\u1CBA\\u1CBD-\\u1CBF\\u1D00-\\u1D2B\\u1D6B-\\u1D77\\u1D79-\\u1D9A\\u1E00-\\u1F15\\u1F18-\\u1F1D' +
    '\\u1F20-\\u1F45\\u1F48-\\u1F4D\\u1F50-\\u1F57\\u1F59\\u1F5B\\u1F5D\\u1F5F-\\u1F7D\\u1F80-\\u1FB4\\u1FB6-\\u1FBC' +
    '\\u1FBE\\u1FC2-\\u1FC4\\u1FC6-\\u1FCC\\u1FD0-\\u1FD3\\u1FD6-\\u1FDB\\u1FE0-\\u1FEC\\u1FF2-\\u1FF4\\u1FF6-\\u1FFC' +
    '\\u2102\\u2107\\u210A-\\u2113\\u2115\\u2119-\\u211D\\u2124\\u2126\\u2128\\u212A-\\u212D\\u212F-\\u2134\\u2139' +
    '\\u213C-\\u213F\\u2145-\\u2149\\u214E\\u2183\\u2184\\u2C00-\\u2C7B\\u2C7E-\\u2CE4\\u2CEB-\\u2CEE\\u2CF2\\u2CF3' +
    '\\uA640-\\uA66D\\uA680-\\uA69B\\uA722-\\uA76F\\uA771-\\uA787\\uA78B-\\uA78E\\uAB70-\\uABBF\\uFB00-\\uFB06' +
    '\\uFB13-\\uFB17\\uFF21-\\uFF3A\\uFF41-\\uFF5A\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}' +
    '\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}';
const afmoeScripts = '[\\u4E00-\\u9FFF\\u3400-\\u4DBF\\uF900-\\uFAFF\\u3040-\\u309F\\u30A0-\\u30FF\\uFF65-\\uFF9F' +
    '\\u2F00-\\u2FDF\\u0E40-\\u0E7F\\u0E80-\\u0EFF\\u1780-\\u17FF\\u1000-\\u109F\\uAA60-\\uAA7F\\uA9E0-\\uA9FF' +
    '\\uAC00-\\uD7AF\\u1100-\\u11FF]+';
const youtuFirst = '[\\uAC00-\\uD7A3\\u3131-\\u318E]+' +
    '|[\\uFF01\\u2026\\u201C\\u201D\\u2018\\u2019\\u2014\\uFF1A\\uFF1B\\uFF0C\\u3001-\\u303F\\uFE30-\\uFE4F]+' +
    '|[\\u3105-\\u312F]+|[\\u4E00-\\u9FA5\\u3040-\\u309F\\u30A0-\\u30FF]+';
const noHan = (cls) => `[${cls.slice(1, -1)}&&[^\\p{Han}]]`;  // Oniguruma class intersection, as Kimi writes it
const kimi = `[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?${noHan(U)}*${noHan(L)}+${C}?|[^\\r\\n\\p{L}\\p{N}]?${noHan(U)}+` +
    `${noHan(L)}*${C}?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`;

// type -> names (llama.cpp's index), the pipeline, where the pipeline comes from.
// Note: in Falcon's real tokenizer.json, the three-digit Split comes AFTER ByteLevel, so HF runs it
// on byte-alphabet text (harmless there: [0-9] are their own alphabet characters; a \p{N} step would not be, as
// the bytes 0xB2 0xB3 0xB9 0xBC-0xBE are the "digits" \u00B2 \u00B3 \u00B9 \u00BC-\u00BE). llama.cpp and polykv run every
// pattern on the original text; the reference does the same by using the GPT-2 regex as a Split there.
const TYPES = {
  'gpt-2': {
    names: ['gpt-2', 'phi-2', 'jina-es', 'jina-de', 'gigachat', 'jina-v2-es', 'jina-v2-de', 'a.x-4.0', 'mellum',
            'modern-bert', 'jina-v1-en', 'jina-v2-code', 'roberta-bpe', 'mpt', 'olmo', 'jais', 'trillion',
            'granite-docling', 'exaone4'],
    pre: byteLevelRegex, source: 'HF ByteLevel(use_regex) pre-tokenizer (GPT-2 regex built into tokenizers)'},
  'llama3': {
    names: ['llama3', 'llama-v3', 'llama-bpe', 'falcon3', 'falcon-h1', 'pixtral', 'midm-2.0', 'lfm2', 'jina-v5-nano',
            'dbrx', 'smaug-bpe', 'chatglm-bpe', 'glm4'],
    pre: split(llama3), source: 'Llama 3 tokenizer.json Split regex'},
  'jais-2': {
    names: ['jais-2'],
    pre: split(`${C}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+` +
               '|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)' +
               '|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}'),
    source: 'Jais 2 tokenizer.json Split regex (Llama 3 with power-of-two whitespace runs)'},
  'qwen2': {
    names: ['qwen2', 'deepseek-r1-qwen', 'kormo', 'f2llmv2', 'stablelm2', 'hunyuan', 'solar-open', 'megrez', 'grok-2'],
    pre: split(qwen2), source: 'Qwen2 tokenizer.json Split regex'},
  'qwen35': {
    names: ['qwen35'],
    pre: split(`${C}|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+` +
               '|\\s+(?!\\S)|\\s+'),
    source: 'Qwen3.5 tokenizer.json Split regex'},
  'ufakzeka': {
    names: ['ufakzeka'],
    pre: split('[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+'),
    source: 'Qwen2 regex without the contraction group (llama.cpp description)'},
  'laguna': {
    names: ['laguna'],
    pre: seq(split('[^\\n]+|[\\n]+'), split(qwen2)), source: 'lines, then the Qwen2 regex (llama.cpp description)'},
  'seed-coder': {
    names: ['seed-coder'],
    pre: split(`${C}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`),
    source: 'Seed-Coder tokenizer.json Split regex'},
  'bailingmoe': {
    names: ['bailingmoe', 'bailingmoe2', 'llada-moe'],
    pre: split("'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*" +
               '|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+'),
    source: 'Ling (BailingMoE) tokenizer.json Split regex, possessive quantifiers kept'},
  'minicpm5': {
    names: ['minicpm5'],
    pre: seq(split('\\p{N}{1,3}'),
             split(`${C}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`)),
    source: 'MiniCPM5 tokenizer.json Split regexes'},
  'exaone-moe': {
    names: ['exaone-moe'],
    pre: split(`${C}|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?` +
               '|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+'),
    source: 'EXAONE MoE tokenizer.json Split regex'},
  'gpt-4o': {
    names: ['gpt-4o', 'llama4', 'kanana2', 'talkie', 'minimax-m2', 'granite-embed-multi-97m'],
    pre: split(o200k('\\p{N}{1,3}')), source: 'o200k (GPT-4o) tokenizer.json Split regex'},
  'tiny_aya': {
    names: ['tiny_aya', 'cohere2moe'],
    pre: seq(split('\\d{1,3}(?=(?:\\d{3})*\\b)'), split(o200k('\\p{N}{1,3}'))),
    source: 'Tiny Aya tokenizer.json Split regexes (digit groups from the right, then o200k)'},
  'tekken': {
    names: ['tekken'],
    pre: split(`[^\\r\\n\\p{L}\\p{N}]?${U}*${L}+|[^\\r\\n\\p{L}\\p{N}]?${U}+${L}*|\\p{N}` +
               '| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+'),
    source: 'Mistral Tekken tokenizer.json Split regex'},
  'youtu': {
    names: ['youtu'],
    pre: seq(split(youtuFirst), split(o200k('\\p{N}'))), source: 'Youtu tokenizer.json Split regexes'},
  'deepseek-v3': {
    names: ['deepseek-v3', 'hunyuan-dense', 'joyai-llm', 'hy_v4'],
    pre: seq(split('\\p{N}{1,3}'), split(cjkV3), split(dsv3)), source: 'DeepSeek V3 tokenizer.json Split regexes'},
  'spark2_5': {
    names: ['spark2_5'],
    pre: seq(split('\\p{N}{1,3}'), split(cjkV3),
             split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+" +
                   '| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+'),
             split('\\p{N}')),
    source: 'Spark 2.5 Split regexes (llama.cpp description)'},
  'afmoe': {
    names: ['afmoe'],
    pre: seq(split('\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))'), split(afmoeScripts), split(dsv3)),
    source: 'AFMoE: digit runs in threes from the right (llama.cpp describes it; regex written here), ' +
            'Asian scripts, the DeepSeek V3 regex'},
  'kimi-k2': {
    names: ['kimi-k2'],
    pre: split(kimi), source: 'Kimi K2 tokenization_kimi.py pattern (class intersection, Oniguruma syntax)'},
  'superbpe': {
    names: ['superbpe'],
    pre: seq(split('\\p{N}+'), split('(?=(\\d{3})+(?!\\d))')), source: 'SuperBPE tokenizer.json Split regexes'},
  'chameleon': {
    names: ['chameleon'],
    pre: seq(split('<sentinel:[0-9]+>'), split('(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z'), split('([\\t\\n]|    |  )'),
             digits(true), split('[\\p{P}!-/:-@\\[-`{-~]'), byteLevelRegex),
    source: 'Chameleon tokenizer.json: Splits, Digits(individual), punctuation Split, ByteLevel(use_regex)'},
  'deepseek-llm': {
    names: ['deepseek-llm'],
    pre: seq(split('[\\r\\n]'), split(`\\s?[${dsLetters}]+`),
             split('\\s?[!-/:-~\\uFF01-\\uFF0F\\uFF1A-\\uFF5E\\u2018-\\u201F\\u3000-\\u3002]+'), split('\\s+$'),
             split(cjkCoder), digits(false)),
    source: 'DeepSeek LLM tokenizer.json: Splits, Digits(contiguous)'},
  'deepseek-coder': {
    names: ['deepseek-coder'],
    pre: seq(split('[\\r\\n]'), split('\\s?\\p{L}+'), split('\\s?\\p{P}+'), split(cjkCoder), digits(true)),
    source: 'DeepSeek Coder tokenizer.json: Splits, Digits(individual)'},
  'falcon': {
    names: ['falcon'],
    pre: seq({type: 'Punctuation', behavior: 'Contiguous'}, split(gpt2), split('[0-9][0-9][0-9]')),
    source: 'Falcon tokenizer.json: Punctuation, ByteLevel(use_regex), Split of three ASCII digits ' +
            '(the GPT-2 regex as a Split: HF runs the later steps on byte-alphabet text, see the note below)'},
  'starcoder': {
    names: ['starcoder', 'refact', 'command-r', 'smollm', 'codeshell', 'exaone', 'minerva-7b', 'mellum2'],
    pre: seq(digits(true), byteLevelRegex), source: 'StarCoder tokenizer.json: Digits(individual), ByteLevel(use_regex)'},
  'bloom': {
    names: ['bloom', 'poro-chat', 'gpt3-finnish'],
    pre: split(bloom), source: 'BLOOM tokenizer.json Split regex'},
  'viking': {
    names: ['viking'],
    pre: seq(split(bloom), digits(true)), source: 'Viking tokenizer.json: the BLOOM Split, Digits(individual)'},
  'gemma4': {
    names: ['gemma4', 'granite-embed-multi-311m', 'sarvam-moe'], escape: true,
    pre: split('[^\\n]+|[\\n]+'),
    source: 'llama.cpp cuts SentencePiece-style BPE text at newline runs only (HF: no pre-tokenizer)'},
  'whitespace': {
    names: ['whitespace'], pre: split('\\S+'), source: 'runs of non-space (jina-embeddings-v2-base-zh)'},
  'default': {
    names: ['default', ''],
    pre: seq(split('[\\p{P}\\$\\+<=>\\^~\\|]+'), split(gpt2), split('\\p{N}+'), split('[0-9][0-9][0-9]')),
    source: "llama.cpp's fallback for GGUFs without tokenizer.ggml.pre (no tokenizer.json of its own)"},
};

const TEXTS = [
  "Hello world",
  " Hello World  ",
  "I'm sure you'll see it's DON'T and WE'LL, they'Re",
  "it'\u017F",  // LATIN SMALL LETTER LONG S case-folds to s
  "CamelCaseWord HTMLParser iPhone XMLHttpRequest",
  "1 12 123 1234 12345 1234567 12345678901",
  "3.14159 and 1,234,567.89 or 10e-5",
  "abc123def 4567xyz",
  "\u0663\u0664\u0665\u0666 \u096A\u096B\u096C \u2167 \u00BD",
  "   leading and trailing   ",
  "a  b   c    d\t\te",
  "line1\nline2\r\nline3\n\n\nline4",
  "  \n  indented\n\tcode\n",
  "def f(x):\n    return x**2 // comment /* c */ <= >= != ==",
  "if (a&&b) { c->d[0] = e | f ^ ~g; }",
  "https://example.com/path/to?q=1&r=two#frag",
  "!!! ??? ... ,,, ;;; ---",
  "\u4f60\u597d\u4e16\u754c\uff0c\u6211\u7231\u7f16\u7a0b\u3002\u6d4b\u8bd5",
  "\u3053\u3093\u306b\u3061\u306f\u3001\u30ab\u30bf\u30ab\u30ca\u3068\u6f22\u5b57",
  "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4 \u3131\u3134 \u3105\u3106",
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645\u060c \u06d4",
  "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e\u0964",
  "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01 \u1780\u17d2\u1798\u17c2\u179a",
  "\u00dcn\u00efc\u00f6d\u00e9 na\u00efve caf\u00e9 e\u0301t\u00e9 \u1f7d\u1fbe \u2126\u212a",
  "\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430 \u0534\u0561\u057e\u056b\u0569",
  "emoji \ud83d\udc4b\ud83c\udffd family \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 \u2764\ufe0f",
  "\uff21\uff22\uff23\uff11\uff12\uff13\uff01\uff1f \u3000 wide",
  "<sentinel:12> IMGIMGABCZ <b>tag</b>",
  "nbsp\u00a0here\u2003em\u2028ls\u0085nel",
  "\u2026\u3002\u3001\u0964 ends.",
  "x/y/z // a/ /b",
  "The year 2024 (\u00a32.5bn, +7%)",
];

function preTokenizer(p) {
  const json = {version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: p, post_processor: null, decoder: null,
    model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
            fuse_unk: false, byte_fallback: false, vocab: {}, merges: []}};
  return hf.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
}

// HF reports offsets in code points; the pieces are the original text's code points between them.
function pieces(pre, text) {
  const cps = Array.from(text);
  const out = [];
  let at = 0;
  for (const [, [begin, end]] of pre.preTokenizeString(text)) {
    if (begin !== at) throw new Error(`gap or overlap at ${at}/${begin} in ${JSON.stringify(text)}: ${JSON.stringify(pre.preTokenizeString(text))}`);
    out.push(cps.slice(begin, end).join(''));
    at = end;
  }
  if (at !== cps.length) throw new Error(`pieces stop at ${at} of ${cps.length} in ${JSON.stringify(text)}`);
  return out;
}

const out = {
  generator: `tools/pretokenizer_refs.js with tokenizers ${require('tokenizers/package.json').version}`,
  texts: TEXTS,
  types: {},
};
for (const [type, t] of Object.entries(TYPES)) {
  const pre = preTokenizer(t.pre);
  const escape = Boolean(t.escape);
  out.types[type] = {
    names: t.names, escape_whitespace: escape, source: t.source,
    splits: TEXTS.map((text) => pieces(pre, escape ? text.replace(/ /g, '\u2581') : text)),
  };
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
