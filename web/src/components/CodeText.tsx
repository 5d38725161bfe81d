// A hint for people (an agent's login or install hint) with its `commands` shown as code.
import { codeSpans } from '../lib/agentVersions';

export function CodeText({ text }: { text: string }) {
  return (
    <>
      {codeSpans(text).map((s, i) => (s.code ? <code key={i}>{s.text}</code> : <span key={i}>{s.text}</span>))}
    </>
  );
}
