"""Lab and grading-worker settings (environment, prefix ``RINGLAB_``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class LabSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RINGLAB_", env_file=".env", extra="ignore")

    # `ringlab serve` also starts one worker; unset means "yes on the embedded SQLite default".
    embedded_worker: bool | None = None
    lab_submit_limit: int = 20  # submissions per student per lab per window
    lab_submit_window_s: int = 600
    lab_max_code_bytes: int = 256 * 1024
    lab_lease_s: float = 30.0  # a running job whose lease is older goes back to the queue
    lab_max_attempts: int = 3  # claims per submission before it is marked an error (ours)
    worker_pool_size: int = 1  # warm sandboxes per worker
    health_max_queue_age_s: float = 300.0  # /healthz is 503 once the oldest queued job is older
    # The lab page warns that the queue is long when a submission made now would wait longer for its verdict.
    lab_queue_long_s: float = Field(default=60.0, gt=0)
    # The worker and everything it starts (sandboxes, ranks) run this many niceness steps (0-19)
    # below the process that starts it, so that grading on the web server's machine takes only
    # the CPU the web process leaves.
    worker_nice: int = Field(default=10, ge=0, le=19)
    # A worker refuses to start on a torch release other than the one the labs are proven on
    # (app.labs.worker.TORCH_SERIES) unless this is set.
    worker_any_torch: bool = False

    def embedded(self, database_url: str) -> bool:
        if self.embedded_worker is not None:
            return self.embedded_worker
        return database_url.startswith("sqlite")
