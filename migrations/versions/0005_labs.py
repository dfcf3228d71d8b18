"""labs: submissions queue and grading workers

Revision ID: 0005
Revises: 0002
Create Date: 2026-11-22 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0005"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUS = sa.Enum(
    "queued", "running", "graded", "failed", "error", name="submissionstatus", native_enum=False, length=16
)


def upgrade() -> None:
    op.create_table(
        "lab_submissions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("lab_id", sa.String(length=80), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("status", STATUS, nullable=False),
        sa.Column("gpus_needed", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=64), nullable=True),
        sa.Column("backend", sa.String(length=16), nullable=True),
        sa.Column("submitted_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("queued_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("score", sa.Integer(), nullable=True),
        sa.Column("max_score", sa.Integer(), nullable=True),
        sa.Column("verdict", sa.JSON(), nullable=True),
        sa.Column("regrades", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_lab_submissions_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lab_submissions")),
    )
    with op.batch_alter_table("lab_submissions", schema=None) as batch_op:
        batch_op.create_index("ix_lab_submissions_queue", ["status", "queued_at"], unique=False)
        batch_op.create_index("ix_lab_submissions_user_lab", ["user_id", "lab_id", "submitted_at"], unique=False)

    op.create_table(
        "lab_workers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("cpu_count", sa.Integer(), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("sandboxed", sa.Boolean(), nullable=False),
        sa.Column("started_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("graded", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lab_workers")),
    )


def downgrade() -> None:
    op.drop_table("lab_workers")
    with op.batch_alter_table("lab_submissions", schema=None) as batch_op:
        batch_op.drop_index("ix_lab_submissions_user_lab")
        batch_op.drop_index("ix_lab_submissions_queue")
    op.drop_table("lab_submissions")
