"""Settings validation and round trips."""

import pytest

from neardup.config import Settings, SettingsError


def test_round_trip_through_json():
    s = Settings(threshold=0.7, num_perm=64, bands=8, rows=8)
    assert Settings.from_json(s.to_json()) == s


def test_fetterly_preset():
    s = Settings.fetterly()
    assert (s.shingle_size, s.wrap_shingles, s.num_perm) == (5, True, 84)
    assert s.method == "supershingles" and s.supershingle_values == 84


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 0},
        {"threshold": 1.5},
        {"method": "nope"},
        {"bands": 4},
        {"bands": 20, "rows": 10},
        {"method": "supershingles", "num_perm": 64},
        {"shingle_size": 0},
        {"max_shingle_df": -1},
    ],
)
def test_impossible_settings_are_refused(kwargs):
    with pytest.raises(SettingsError):
        Settings(**kwargs)


def test_unknown_keys_in_stored_settings_are_an_error():
    with pytest.raises(SettingsError, match="unknown"):
        Settings.from_dict({"threshold": 0.8, "bogus": 1})


def test_incompatible_sketch_settings_are_named():
    with pytest.raises(SettingsError, match="num_perm"):
        Settings().check_compatible(Settings(num_perm=64))
    Settings().check_compatible(Settings(threshold=0.5))  # threshold does not change sketches
