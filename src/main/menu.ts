/** The application menu. Actions that belong to the renderer are sent to it as commands (App.tsx runCommand). */
import { Menu, type BrowserWindow, type MenuItemConstructorOptions } from 'electron';

export function buildMenu(getWindow: () => BrowserWindow | undefined, extra: { showSocket: () => void }): Menu {
  const send = (command: string) => () => {
    const win = getWindow();
    if (!win) return;
    win.show();
    win.webContents.send('ollie:command', command);
  };
  const template: MenuItemConstructorOptions[] = [
    {
      label: '&File',
      submenu: [
        { label: 'New &Session…', accelerator: 'CmdOrCtrl+N', click: send('new-session') },
        { label: 'New &Agent…', accelerator: 'CmdOrCtrl+Shift+N', click: send('new-agent') },
        { type: 'separator' },
        { label: '&Connect to…', click: send('connect-to') },
        { label: `Copy 9P Socket Address`, click: extra.showSocket },
        { type: 'separator' },
        { role: 'quit', accelerator: 'CmdOrCtrl+Q' },
      ],
    },
    {
      label: '&Edit',
      submenu: [
        { role: 'undo' },
        { role: 'redo' },
        { type: 'separator' },
        { role: 'cut' },
        { role: 'copy' },
        { role: 'paste' },
        { role: 'selectAll' },
      ],
    },
    {
      label: '&Agent',
      submenu: [
        { label: '&Focus Prompt', accelerator: 'CmdOrCtrl+L', click: send('focus-prompt') },
        { label: '&Stop Turn', accelerator: 'CmdOrCtrl+.', click: send('stop') },
        { label: 'Pending &Approvals', accelerator: 'CmdOrCtrl+Shift+A', click: send('approvals') },
      ],
    },
    {
      label: '&View',
      submenu: [
        { label: '9P &Console', accelerator: 'CmdOrCtrl+`', click: send('toggle-console') },
        { label: '&Processes', accelerator: 'CmdOrCtrl+Shift+P', click: send('toggle-procs') },
        { label: 'Searc&h', accelerator: 'CmdOrCtrl+Shift+F', click: send('search') },
        { label: 'Se&ttings', accelerator: 'CmdOrCtrl+,', click: send('settings') },
        { type: 'separator' },
        { role: 'reload' },
        { role: 'toggleDevTools' },
        { type: 'separator' },
        { role: 'resetZoom' },
        { role: 'zoomIn' },
        { role: 'zoomOut' },
        { type: 'separator' },
        { role: 'togglefullscreen' },
      ],
    },
  ];
  return Menu.buildFromTemplate(template);
}
