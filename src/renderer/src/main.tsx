import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.js';
import { applyTheme, savedTheme } from './lib/theme.js';
import './styles.css';

// Before the first render, so a pinned theme never flashes the other one.
applyTheme(savedTheme());

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root element');
createRoot(root).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
