// A terminal emulator (xterm.js) showing one terminal's stream: a user's shell (typing and
// resizing reach it) or, read-only, a dev server's log. Fits its container; copy is the
// browser's selection, paste goes to the shell as typed input.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'react';
import { connectTerminal, type TerminalExit } from '../lib/terminalSocket';

export function XtermView(props: {
  terminalId: string;
  /** A dev server's log: no input, no resize. */
  readOnly?: boolean;
  label: string;
  onExit?: (exit: TerminalExit) => void;
  /** The terminal cannot be attached (e.g. it is gone, or not made yet). */
  onProblem?: (message: string) => void;
}) {
  const box = useRef<HTMLDivElement>(null);
  const [size, setSize] = useState<{ cols: number; rows: number } | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const onExit = useRef(props.onExit);
  onExit.current = props.onExit;
  const onProblem = useRef(props.onProblem);
  onProblem.current = props.onProblem;

  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const term = new Terminal({
      convertEol: !!props.readOnly,
      disableStdin: !!props.readOnly,
      cursorBlink: !props.readOnly,
      fontSize: 13,
      scrollback: 5000,
      fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(element);
    const socket = connectTerminal(props.terminalId, {
      onOutput: (data) => term.write(data),
      onReplay: () => term.reset(),
      onExit: (exit) => {
        term.write(`\r\n[${exit.signal ? `ended by ${exit.signal}` : `exited with ${exit.exit_code ?? '?'}`}]\r\n`);
        onExit.current?.(exit);
      },
      onError: (message) => {
        setProblem(message);
        onProblem.current?.(message);
      },
    });
    const typed = props.readOnly ? null : term.onData((data) => socket.input(data));
    const resized = term.onResize(({ cols, rows }) => {
      setSize({ cols, rows });
      if (!props.readOnly) socket.resize(cols, rows);
    });
    const refit = () => {
      try {
        fit.fit();
      } catch {
        // not laid out yet (hidden): the next resize fits it
      }
    };
    refit();
    setSize({ cols: term.cols, rows: term.rows });
    if (!props.readOnly) socket.resize(term.cols, term.rows);
    const observer = new ResizeObserver(refit);
    observer.observe(element);
    if (!props.readOnly) term.focus();
    return () => {
      observer.disconnect();
      typed?.dispose();
      resized.dispose();
      socket.close();
      term.dispose();
    };
  }, [props.terminalId, props.readOnly]);

  return (
    <div className="xterm-wrap">
      {problem && (
        <div className="banner error" role="alert">
          {problem}
        </div>
      )}
      <div
        ref={box}
        className={props.readOnly ? 'xterm-box log' : 'xterm-box'}
        role="group"
        aria-label={props.label}
        data-testid={props.readOnly ? 'dev-server-log' : 'terminal'}
        data-terminal-id={props.terminalId}
        data-cols={size?.cols}
        data-rows={size?.rows}
      />
    </div>
  );
}
