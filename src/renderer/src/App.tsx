/** Placeholder page until the GUI issue: the renderer will be a 9P client of olliesrv, like any other. */
export function App() {
  const version = window.ollie?.version;
  return (
    <main style={{ fontFamily: 'system-ui, sans-serif', margin: '3rem auto', maxWidth: '40rem', lineHeight: 1.5 }}>
      <h1>Ollie{version ? ` ${version}` : ''}</h1>
      <p>The desktop UI is under construction.</p>
      <p>
        Meanwhile the daemon serves its namespace over 9P on a Unix socket,{' '}
        <code>$XDG_RUNTIME_DIR/ollie/ollie.sock</code>. Try <code>ollie-9p ls /</code>.
      </p>
    </main>
  );
}
