// A value to copy (a webhook's URL): shown as code, selectable, with a Copy button whose
// outcome is a toast (the clipboard changes nothing on the page).
import { toast } from '../../lib/toast';

export function copyText(text: string): void {
  // Only a secure page (https, localhost) has a clipboard; elsewhere the text is selectable.
  const written = navigator.clipboard ? navigator.clipboard.writeText(text) : Promise.reject(new Error('no clipboard'));
  written.then(
    () => toast('Copied'),
    () => toast('Copying failed: select the text and copy it yourself.', { error: true }),
  );
}

export function Copyable({ text, what }: { text: string; what: string }) {
  return (
    <span className="copyable">
      <code>{text}</code>
      <button type="button" aria-label={`Copy ${what}`} onClick={() => copyText(text)}>
        Copy
      </button>
    </span>
  );
}
