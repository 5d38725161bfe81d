// The agent's open questions (MCP `ask_user`) and their answers.
import { useState } from 'react';
import { call } from '../../api/client';
import type { QuestionDto } from '../../api/types';
import { useMutation } from '../../lib/useMutation';

/** The agent's open questions (MCP `ask_user`), live: options as buttons, else free text.
 * `answer` false (a viewer, issue 49): the questions alone, for a member to answer. */
export function Questions({ questions, answer = true }: { questions: QuestionDto[]; answer?: boolean }) {
  const pending = questions.filter((q) => q.status === 'pending');
  if (!pending.length) return null;
  return (
    <div className="questions">
      {pending.map((q) => (
        <QuestionCard key={q.id} question={q} answerable={answer} />
      ))}
    </div>
  );
}

function QuestionCard({ question, answerable }: { question: QuestionDto; answerable: boolean }) {
  const [text, setText] = useState('');
  const { error, run } = useMutation();
  const answer = (value: string) => run(() => call('question.answer', { id: question.id, answer: value }));
  return (
    <section className="question-card" role="group" aria-label="The agent asks" data-testid="question-card">
      <p className="question-text">{question.question}</p>
      {!answerable ? (
        <p className="hint">A member of the workspace answers it.</p>
      ) : question.options.length > 0 ? (
        <div className="actions">
          {question.options.map((o) => (
            <button key={o} onClick={() => void answer(o)}>
              {o}
            </button>
          ))}
        </div>
      ) : (
        <form
          className="actions"
          onSubmit={(e) => {
            e.preventDefault();
            if (text.trim()) void answer(text);
          }}
        >
          <input aria-label="Your answer" value={text} onChange={(e) => setText(e.target.value)} />
          <button className="primary" type="submit">
            Answer
          </button>
        </form>
      )}
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
