"""courses: course instances, enrollments with per-course roles, extensions, an audit log; students'
work carries the course it was made in; every existing row moves into the default course

Existing accounts are enrolled in the default course (instructors as its instructors) and the site-wide
``instructor`` role becomes ``admin`` (a site administrator, who manages every course).

Revision ID: 0011_courses
Revises: the six 0010 revisions (this merges them)
Create Date: 2026-11-26 21:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0011_courses"
down_revision: str | Sequence[str] | None = (
    "0010_exercise_giveups",
    "0010_fractional_scores",
    "0010_lab_hints",
    "0010_password_resets",
    "0010_personal_cards",
    "0010_problem_reports",
)
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WORK = ("quiz_attempts", "lab_submissions", "flashcard_reviews", "exercise_part_answers")


def upgrade() -> None:
    op.create_table(
        "courses",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("retired_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("term", sa.String(length=80), nullable=True),
        sa.Column("starts_on", sa.String(length=10), nullable=True),
        sa.Column("ends_on", sa.String(length=10), nullable=True),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("assignments", sa.JSON(), nullable=True),
        sa.Column("join_code", sa.String(length=40), nullable=True),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_courses")),
        sa.UniqueConstraint("join_code", name=op.f("uq_courses_join_code")),
    )
    courses = sa.table(
        "courses",
        sa.column("id"),
        sa.column("position"),
        sa.column("updated_at", app.db.UTCDateTime(timezone=True)),
        sa.column("title"),
        sa.column("time_zone"),
    )
    op.bulk_insert(
        courses,
        [
            {
                "id": "default",
                "position": 0,
                "updated_at": app.db.utcnow(),
                "title": "Default course",
                "time_zone": "UTC",
            }
        ],
    )
    op.create_table(
        "course_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("course_id", sa.String(length=80), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["courses.id"], name=op.f("fk_course_versions_course_id_courses")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_course_versions")),
        sa.UniqueConstraint("course_id", "version", name=op.f("uq_course_versions_course_id")),
    )
    op.create_index(op.f("ix_course_versions_course_id"), "course_versions", ["course_id"])
    # The default course's first version: what app.content.sync writes for a tree without its course.yaml.
    versions = sa.table(
        "course_versions", sa.column("course_id"), sa.column("version"), sa.column("values", sa.JSON()),
        sa.column("created_at", app.db.UTCDateTime(timezone=True)),
    )  # fmt: skip
    default = {"title": "Default course", "term": None, "starts_on": None, "ends_on": None, "time_zone": "UTC",
               "assignments": None}  # fmt: skip
    op.bulk_insert(versions, [{"course_id": "default", "version": 1, "values": default, "created_at": app.db.utcnow()}])
    op.create_table(
        "enrollments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("course_id", sa.String(length=80), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column(
            "role",
            sa.Enum("student", "ta", "instructor", name="courserole", native_enum=False, length=20),
            nullable=False,
        ),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["courses.id"], name=op.f("fk_enrollments_course_id_courses")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_enrollments_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_enrollments")),
        sa.UniqueConstraint("course_id", "user_id", name=op.f("uq_enrollments_course_id")),
    )
    op.create_index(op.f("ix_enrollments_course_id"), "enrollments", ["course_id"])
    op.create_index(op.f("ix_enrollments_user_id"), "enrollments", ["user_id"])
    op.create_table(
        "extensions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("course_id", sa.String(length=80), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("assessment", sa.String(length=100), nullable=False),
        sa.Column("due_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("extra_attempts", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("granted_by_id", sa.Integer(), nullable=True),
        sa.Column("granted_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["courses.id"], name=op.f("fk_extensions_course_id_courses")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_extensions_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["granted_by_id"], ["users.id"], name=op.f("fk_extensions_granted_by_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_extensions")),
    )
    op.create_index("ix_extensions_course_user", "extensions", ["course_id", "user_id", "assessment"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=80), nullable=False),
        sa.Column("action", sa.String(length=40), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"])
    # Added in place (ALTER TABLE ... ADD COLUMN), never by copying a table: on SQLite, with foreign keys
    # on, dropping a table to copy it would cascade to the rows that reference it (answers, reviews).
    for table in WORK:
        op.add_column(table, sa.Column("course_id", sa.String(length=80), server_default="default", nullable=False))
    op.add_column("users", sa.Column("full_name", sa.String(length=120), nullable=True))
    op.add_column("users", sa.Column("email", sa.String(length=254), nullable=True))
    # Every account so far was in the one class the server ran: now its default course.
    op.execute(
        "INSERT INTO enrollments (course_id, user_id, role, created_at) "
        "SELECT 'default', id, CASE WHEN role = 'instructor' THEN 'instructor' ELSE 'student' END, created_at "
        "FROM users"
    )
    op.execute("UPDATE users SET role = 'admin' WHERE role = 'instructor'")


def downgrade() -> None:
    op.execute("UPDATE users SET role = 'instructor' WHERE role = 'admin'")
    # Dropped in place (SQLite 3.35+ has DROP COLUMN): see upgrade() for why a table is never copied.
    for table, column in [(t, "course_id") for t in WORK] + [("users", "email"), ("users", "full_name")]:
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_extensions_course_user", table_name="extensions")
    op.drop_table("extensions")
    op.drop_index(op.f("ix_enrollments_user_id"), table_name="enrollments")
    op.drop_index(op.f("ix_enrollments_course_id"), table_name="enrollments")
    op.drop_table("enrollments")
    op.drop_index(op.f("ix_course_versions_course_id"), table_name="course_versions")
    op.drop_table("course_versions")
    op.drop_table("courses")
