"""The pre-registered studies (docs/study.md): the one reading of a plan's primaries (``reading``: Holm's loop over
the reading functions each plan registers), study 1's plan (study/plan.yaml), the record of the plan a run began
under (``record``), its estimators and its primaries and secondaries read (``findings``); the second study's plan
(study/plan2.yaml) read from its record (``study2_reading``, ``study2_secondaries``); and issue 55's fix plan read
from its run's record (``fix_reading``). Their pages are written one floor up, in ``lostmid.pages``."""
