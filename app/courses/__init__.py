"""Courses: instances of the content, each with its roster, staff, dates and students' extensions."""
