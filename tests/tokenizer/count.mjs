// Counts tokens with Claude's public tokenizer: a JSON array of strings on stdin, a JSON array of counts out.
// The tokenizer is built once for the whole batch (building it costs more than counting).
import { getTokenizer } from '@anthropic-ai/tokenizer';

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const tokenizer = getTokenizer();
  try {
    // NFKC, as the package's own countTokens does.
    const counts = JSON.parse(input).map((text) => tokenizer.encode(text.normalize('NFKC'), 'all').length);
    process.stdout.write(JSON.stringify(counts));
  } finally {
    tokenizer.free();
  }
});
