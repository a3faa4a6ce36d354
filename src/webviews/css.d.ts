// esbuild imports a webview's .css as text (loader: text); the bundle adopts it as a stylesheet.
declare module '*.css' {
  const text: string;
  export default text;
}
