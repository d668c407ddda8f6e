"""English formats: a time to the second with its zone (the admin said "Nov. 27, 2026, 8 p.m.", which
says nothing about a 20-second cool-down)."""

from accounts.formats import DJANGO_DATE, DJANGO_DATETIME, DJANGO_TIME

DATETIME_FORMAT = DJANGO_DATETIME
SHORT_DATETIME_FORMAT = DJANGO_DATETIME
DATE_FORMAT = DJANGO_DATE
SHORT_DATE_FORMAT = DJANGO_DATE
TIME_FORMAT = DJANGO_TIME
