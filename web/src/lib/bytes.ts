// UTF-8 length of a string: the server reports a streamed message's length in bytes.
const encoder = new TextEncoder();
export function utf8Length(s: string): number {
  let ascii = true;
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0x7f) {
      ascii = false;
      break;
    }
  }
  return ascii ? s.length : encoder.encode(s).length;
}
