// Credentials the engine sends that are not a strategy's: MLflow's (MLFLOW_TRACKING_TOKEN, or the username and password
// it sends as HTTP Basic). A server or proxy that refuses a request may quote the header back, and the engine logs the
// server's message: every log line masks these, whatever sent them.

/** The strings to mask: the token, the password, and the Basic header's base64 of "user:password". */
export function credentialSecrets(env: NodeJS.ProcessEnv = process.env): string[] {
  const out: string[] = [];
  if (env.MLFLOW_TRACKING_TOKEN?.trim()) out.push(env.MLFLOW_TRACKING_TOKEN, env.MLFLOW_TRACKING_TOKEN.trim());
  if (env.MLFLOW_TRACKING_PASSWORD?.trim()) out.push(env.MLFLOW_TRACKING_PASSWORD, env.MLFLOW_TRACKING_PASSWORD.trim());
  if (env.MLFLOW_TRACKING_USERNAME) out.push(Buffer.from(`${env.MLFLOW_TRACKING_USERNAME}:${env.MLFLOW_TRACKING_PASSWORD ?? ''}`).toString('base64'));
  return [...new Set(out)];
}
