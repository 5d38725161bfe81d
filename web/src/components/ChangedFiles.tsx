// The changed files as a tree (a folder, then its files), each with its added and removed
// line counts, its open threads and whether it is viewed; a click goes to the file's diff
// and unfolds it. Beside the diffs on a wide screen, a fold above them on a narrow one.
import type { FileChangeDto } from '../api/types';

/** The files grouped by folder, folders in name order, `''` for the top level. */
export function byFolder(files: FileChangeDto[]): [string, FileChangeDto[]][] {
  const folders = new Map<string, FileChangeDto[]>();
  for (const f of files) {
    const slash = f.path.lastIndexOf('/');
    const folder = slash < 0 ? '' : f.path.slice(0, slash);
    folders.set(folder, [...(folders.get(folder) ?? []), f]);
  }
  return [...folders.entries()].sort(([a], [b]) => a.localeCompare(b));
}

export function ChangedFiles(props: {
  files: FileChangeDto[];
  openThreads: (path: string) => number;
  onOpen: (file: FileChangeDto) => void;
}) {
  const { files, openThreads, onOpen } = props;
  return (
    <details className="changed-files" open>
      <summary>
        Files <span className="hint">({files.length})</span>
      </summary>
      <nav aria-label="Changed files">
        {byFolder(files).map(([folder, inFolder]) => (
          <div key={folder} className="folder">
            {folder && <div className="folder-name">{folder}/</div>}
            <ul>
              {inFolder.map((f) => {
                const threads = openThreads(f.path);
                return (
                  <li key={`${f.repository_id ?? ''}:${f.path}`} data-viewed={f.viewed ? 'yes' : 'no'}>
                    <button type="button" className="link" onClick={() => onOpen(f)} title={f.path}>
                      {f.viewed && <span aria-label="viewed">✓ </span>}
                      {f.path.slice(folder ? folder.length + 1 : 0)}
                    </button>{' '}
                    <span className="adds">+{f.additions}</span> <span className="dels">−{f.deletions}</span>
                    {threads > 0 && (
                      <span className="badge">
                        {threads} open thread{threads === 1 ? '' : 's'}
                      </span>
                    )}
                  </li>
                );
              })}
            </ul>
          </div>
        ))}
      </nav>
    </details>
  );
}
