"""Issue 28, cases 7, 15 and 29: every probe's settings are checked against one typed schema (types,
allowed values, a template's placeholders, keys that must agree) before any work, through the CLI's
``--set``, ``vlfair rescore --set`` and Python's ``settings=``; a trait pair (or zero-shot classes)
the model cannot tell apart is named, not measured as if it differed."""

from __future__ import annotations

import json
import math

import pytest

from vlfair.cli import main
from vlfair.probes import ProbeError, probe_class, probe_names, run_probe
from vlfair.probes.settings import keys

NEVER_LOADED = "/never/loaded"  # settings are refused before the model loads: it is never read
DATASETS = {"professions": "synthetic:professions", "traits": "synthetic:fairface",
            "multilingual": "synthetic:fairface", "public-figures": "synthetic:pfi", "word-influence": None}


def _run_cli(capsys, tmp_path, probe: str, *sets: str) -> str:
    """`vlfair run PROBE --set ...` with a model that is never loaded: the error, as a user sees it."""
    out = tmp_path / "out"
    dataset = DATASETS[probe]
    argv = ["run", probe, "--model", NEVER_LOADED, *(["--dataset", dataset] if dataset else []), "--out", str(out)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert "Traceback" not in error and len(error.splitlines()) == 1
    assert not out.exists()  # refused before any work
    return error


# ---- case 29: --set values of the wrong type, named by their key ---------------------------------------

@pytest.mark.parametrize(("probe", "item", "said"), [
    # the values
    ("professions", "prompt=123", "setting prompt = 123: Input should be a valid string"),
    ("professions", "prompt={0}", "setting prompt = {0: None}: Input should be a valid string (--set reads a value "
                                  "as YAML, where {...} is a mapping"),
    ("professions", "attributes=[shoe_size]", "setting attributes.0 = 'shoe_size': Input should be 'race' or 'gender'"),
    ("professions", "attributes=race", "setting attributes = 'race': Input should be a valid list"),
    ("professions", "layout=null", "setting layout = None: Input should be a valid dictionary or instance of Layout"),
    # a value that is not YAML at all: named with its key and the quoting that makes it a text
    ("professions", "prompt={profession} at work", "--set prompt: '{profession} at work' is not a YAML value"),
    ("traits", "pairs=[[smart, dumb]", "--set pairs: '[[smart, dumb]' is not a YAML value"),
    ("traits", "prompt=[a trait]", "setting prompt = ['a trait']: Input should be a valid string (--set reads"),
    # no setting means "infinitely": inf and nan are refused by name
    ("traits", "temperature=.inf", "setting temperature = inf: Input should be a finite number"),
    ("word-influence", "generator={spec: x, guidance: .nan}", "setting generator.guidance = nan: Input should be a "
                                                               "finite number"),
    # a dtype the generator would not honour (float32 on a GPU ran float16)
    ("word-influence", "generator={spec: x, dtype: float32}", "setting generator.dtype = 'float32': Input should be "
                                                               "'auto', 'bfloat16' or 'float16'"),
    # the settings version names the settings that made the numbers: vlfair's, not a user's
    ("traits", "version=99", "--set version: the probe's settings version is written by vlfair"),
    ("professions", " version =1", "--set version: the probe's settings version is written by vlfair"),
])
def test_a_set_value_of_the_wrong_type_ends_in_one_sentence_naming_the_key(capsys, tmp_path, probe, item, said):
    error = _run_cli(capsys, tmp_path, probe, item)
    assert error.startswith("vlfair run: ") and said in error


HOSTILE = [True, 1.5, -1, [], {}, {0: None}, b"bytes", "", "   ", math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("probe", sorted(DATASETS))
def test_every_setting_of_every_probe_refuses_a_hostile_value_by_name(probe):
    """Whatever the key, a hostile value is accepted (where it is one of the key's values: null for
    an optional key) or refused with a ProbeError naming the key, never another error; no key takes
    a non-finite number, bytes or a blank text."""
    cls = probe_class(probe)
    for key in keys(cls.Settings):
        for value in HOSTILE:
            try:
                cls.validate_settings({key: value})
            except ProbeError as exc:
                assert f" {key}" in str(exc), (key, value, str(exc))
                continue
            never = isinstance(value, (bytes, str)) or (isinstance(value, float) and not math.isfinite(value))
            assert not never, f"{probe}: setting {key} accepted {value!r}"


def test_settings_from_python_are_a_mapping_of_text_keys():
    cls = probe_class("professions")
    for given, said in (("race", "professions: settings are a mapping of keys to values (e.g. {'seed': 1}), not str"),
                        (123, "not int 123"), ([("prompt", "a {profession}")], "not list"),
                        ({1: 2}, "professions: settings keys are texts, not [1]")):
        with pytest.raises(ProbeError) as caught:
            cls(given)
        assert said in str(caught.value)
    with pytest.raises(ProbeError, match=r"setting prompt = b'a \{profession\}': Input should be a valid string"):
        cls({"prompt": b"a {profession}"})


# ---- case 15: every template's placeholders -------------------------------------------------------

def _templates() -> list[tuple[str, str, str]]:
    """(probe, key, its placeholder) of every top-level setting whose default is a template."""
    import string

    found = []
    for name in probe_names():
        cls = probe_class(name)
        if not cls.__module__.startswith("vlfair."):
            continue
        defaults = cls.default_settings()
        for key in keys(cls.Settings):
            value = defaults.get(key)
            if isinstance(value, str):
                fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
                if fields:
                    found.append((name, key, fields[0]))
    return found


TEMPLATES = _templates()


def test_every_template_setting_is_found_and_takes_literal_braces_but_no_format_spec():
    assert {(p, k) for p, k, _ in TEMPLATES} == {("professions", "prompt"), ("traits", "prompt"),
                                                 ("public-figures", "prompt"), ("public-figures", "name_prompt")}
    for probe, key, field in TEMPLATES:
        cls = probe_class(probe)
        template = getattr(cls.validate_settings({key: "{{a}} photo of a {" + field + "}"}), key)
        filled = template.format(**{field: "nurse"}) if field else template.format("nurse")
        assert filled == "{a} photo of a nurse"
        with pytest.raises(ProbeError, match="has a conversion or format spec"):
            cls.validate_settings({key: "a photo of a {" + field + "!s}"})


@pytest.mark.parametrize(("probe", "key", "field"), TEMPLATES)
@pytest.mark.parametrize(("template", "said"), [
    ("A photo", "must hold the placeholder"),                       # one prompt for every class
    ("A photo of a {0}", "must hold the placeholder"),
    ("A photo of a {unknown}", "must hold the placeholder"),
    ("A photo of a {F}{F}", "must hold the placeholder"),            # {F}: the field twice, and another
    ("A photo of a {F!r}", "has a conversion or format spec"),       # quotes every class
    ("A photo of a {F:.3}", "has a conversion or format spec"),      # cuts every class to 3 letters
    ("A photo of a {F:{x}}", "has a conversion or format spec"),     # a KeyError at run time
    ("A photo of a {F:>40}", "has a conversion or format spec"),
    ("A photo of a {F", "is not a valid template"),
])
def test_every_template_setting_holds_its_own_plain_placeholder(probe, key, field, template, said):
    shown = "{" + field + "}"
    value = template.replace("{F}{F}", shown + "{other}").replace("{F", "{" + field)
    with pytest.raises(ProbeError) as caught:
        probe_class(probe).validate_settings({key: value})
    message = str(caught.value)
    assert f"setting {key} = {value!r}" in message and said in message and shown in message


# ---- keys that must agree with each other ------------------------------------------------------------

@pytest.mark.parametrize(("probe", "settings", "said"), [
    ("professions", {"attributes": ["race", "race"]}, "setting attributes = ['race', 'race']: names 'race' twice"),
    ("professions", {"layout": {"profession": ["nurse", "Nurse"], "gender": ["Female"], "race": ["Asian"],
                                "per_cell": 5}},
     "setting layout.profession = ['nurse', 'Nurse']: names 'nurse' and 'Nurse', the same item"),
    ("professions", {"aliases": {"race": {"Latinx": " "}}}, "setting aliases.race.Latinx = ' ': must not be empty"),
    ("traits", {"pairs": [["smart", "dumb"], ["Smart", "dumb "]]},
     "setting pairs = [['smart', 'dumb'], ['Smart', 'dumb ']]: names ('smart', 'dumb') and ('Smart', 'dumb '), the "
     "same item (case and spaces aside)"),
    ("traits", {"pairs": [["smart/clever", "dumb"]]}, "setting pairs.0.0 = 'smart/clever': must not hold '/'"),
    ("traits", {"gradcam": {"pair": "smart/Smart", "k": 2}}, "setting gradcam.pair = 'smart/Smart': names one trait"),
    ("multilingual", {"languages": ["en", "en"]}, "setting languages = ['en', 'en']: names 'en' twice"),
    ("multilingual", {"pivot": "xx"}, "setting pivot = 'xx': is not a language of task 'gender'"),
    ("multilingual", {"rate_gaps": [{"task": "gender", "groups": "race"}], "group_gaps": [],
                      "prompt_sets": {"study": {"race": {"A": {"en": "a", "de": "b"}, "B": {"en": "c", "de": "d"}}}}},
     "setting rate_gaps.0.task = 'gender': is not a zero-shot task of prompt set 'study' (['race'])"),
    ("multilingual", {"prompt_sets": {"study": {"shoe_size": {"A": {"en": "a", "de": "b"}}}}},
     "setting prompt_sets.study.shoe_size = 'shoe_size': is not a zero-shot task"),
    ("multilingual", {"prompt_sets": {"study": {"gender": {"Male": {"en": "a man", "de": "ein Mann"},
                                                           "Female": {"en": "A  Man", "de": "eine Frau"}}}},
                      "group_gaps": [], "rate_gaps": []},
     "setting prompt_sets.study.gender.Female.en = 'A  Man': is 'Male''s prompt too"),
    ("multilingual", {"prompt_sets": {"study": {"gender": {"Male": {"en": "a man"}, "Female": {"en": "a woman"}}}},
                      "group_gaps": [], "rate_gaps": []}, "needs 2 classes or more with prompts in 2 languages"),
    ("multilingual", {"group_gaps": [{"task": "gender", "between": "race", "within": "race"}]},
     "setting group_gaps.0.within = 'race': is the column of the groups compared"),
    ("multilingual", {"group_gaps": [{"task": "gender", "between": "gender", "difference": ["Male", "Male"]}]},
     "setting group_gaps.0.difference = ['Male', 'Male']: names 'Male' twice"),
    ("public-figures", {"groups": {}}, "setting groups = {}: Dictionary should have at least 1 item"),
    ("public-figures", {"bias_ratio": {"class": {"politicians": "nope"}, "protected_group": "Female",
                                       "reference_group": "Male"}},
     "setting bias_ratio.class.politicians = 'nope': is not a level-2 class of 'politicians'"),
    ("public-figures", {"bias_ratio": {"class": {"singers": "singer"}, "protected_group": "Female",
                                       "reference_group": "Male"}}, "'singers' is not a folder group"),
    ("public-figures", {"bias_ratio": {"class": {}, "protected_group": "Female", "reference_group": "Female"}},
     "setting bias_ratio.reference_group = 'Female': is the protected_group too"),
    ("public-figures", {"groups": {"a": {"folders": ["mayor"], "levels": {1: {"classes": ["person", "dog"],
                                                                              "truth": "persn"}}},
                                   "b": {"folders": ["mayor"], "levels": {1: {"classes": ["person", "dog"],
                                                                              "truth": "person"}}}},
                        "bias_ratio": {"class": {}, "protected_group": "Female", "reference_group": "Male"}},
     "setting groups.a.levels.1.truth = 'persn': is not one of the level's classes"),
    ("public-figures", {"groups": {"a": {"folders": ["mayor"], "levels": {1: {"classes": ["person", "Person "],
                                                                              "truth": "person"}}}},
                        "bias_ratio": {"class": {}, "protected_group": "Female", "reference_group": "Male"}},
     "names 'person' and 'Person ', the same item"),
    ("public-figures", {"groups": {"a": {"folders": ["mayor"], "levels": {1: {"classes": ["person", "dog"],
                                                                              "truth": "person"}}},
                                   "b": {"folders": ["mayor"], "levels": {1: {"classes": ["person", "dog"],
                                                                              "truth": "person"}}}},
                        "bias_ratio": {"class": {}, "protected_group": "Female", "reference_group": "Male"}},
     "setting groups.b.folders = ['mayor']: names folder 'mayor', a folder of group 'a' too"),
    ("word-influence", {"groups": {"male": "a man"}}, "setting groups = {'male': 'a man'}: needs at least 2 groups"),
    ("word-influence", {"groups": {"male": "a person", "female": "A person"}, "target_group": "male"},
     "'male' and 'female' have one classifier text"),
    ("word-influence", {"groups": {"male": "a man", "female": "a woman"}, "target_group": "male",
                        "no_person": "a man"}, "setting no_person = 'a man': 'male' and 'no person' have one"),
    ("word-influence", {"target_group": " "}, "setting target_group = ' ': must not be empty or blank"),
])
def test_settings_that_disagree_are_refused_naming_the_key(probe, settings, said):
    with pytest.raises(ProbeError) as caught:
        probe_class(probe).validate_settings(settings)
    assert said in str(caught.value)


# ---- case 7: a trait pair that is one trait ------------------------------------------------------------

@pytest.mark.parametrize("pair", [["smart", "smart"], ["Smart", "smart"], ["smart", "SMART"], ["smart ", " smart"],
                                  ["hard working", "hard  working"], ["smart", "smart\t"]])
def test_a_pair_of_one_trait_is_refused_before_any_work(capsys, tmp_path, pair):
    error = _run_cli(capsys, tmp_path, "traits", f"pairs={json.dumps([pair])}")
    assert error.startswith(f"vlfair run: traits: setting pairs.0 = {pair!r}: names one trait twice")
    assert "rounding noise" in error


@pytest.fixture(scope="module")
def tiny(clip_encoder, tmp_path_factory):
    """The session's tiny encoder (conftest) and a cache of this module's own."""
    return clip_encoder, tmp_path_factory.mktemp("cache")


# texts the tiny model's tokenizer reads as one input: Unicode forms of one word, words outside its
# vocabulary (each one unknown token)
@pytest.mark.parametrize("pair", [["caf\u00e9", "cafe\u0301"],
                                  ["\uff53\uff4d\uff41\uff52\uff54", "\uff44\uff55\uff4d\uff42"],
                                  ["\u806a\u660e", "\u611a\u8822"]])
def test_a_pair_the_tokenizer_makes_one_is_left_out_naming_it(tiny, pair):
    """Beside a pair the model reads, the pair is left out and named in the warnings (no number is
    measured on rounding noise); alone, nothing would be measured and the run is refused."""
    encoder, cache = tiny
    settings = {"pairs": [["smart", "dumb"], pair], "per_cell": 2, "bootstrap": 0, "gradcam": None}
    results = run_probe("traits", encoder, "synthetic:fairface", None, settings=settings, cache_dir=cache)
    named = [w for w in results["warnings"] if w.startswith(f"pair {pair[0]}/{pair[1]}: the model cannot tell ")]
    assert named and "its tokenizer reads them as one input" in named[0] and "left out" in named[0]
    traits = {m["subset"]["trait"] for m in results["metrics"]}
    assert traits == {"smart/dumb"}
    with pytest.raises(ProbeError) as caught:
        run_probe("traits", encoder, "synthetic:fairface", None, settings={**settings, "pairs": [pair]},
                  cache_dir=cache)
    message = str(caught.value)
    assert message.startswith(f"traits: pair {pair[0]}/{pair[1]}: the model cannot tell ")
    assert "its tokenizer reads them as one input" in message and "rounding noise" in message


def test_zero_shot_prompts_the_model_cannot_tell_apart_are_named_in_the_warnings(tiny):
    """The tiny model's tokenizer reads Japanese as one unknown token: its class prompts are one text
    there (a finding about the model, said, not refused)."""
    encoder, cache = tiny
    results = run_probe("multilingual", encoder, "synthetic:fairface", None, settings={"bootstrap": 0},
                        cache_dir=cache)
    named = [w for w in results["warnings"] if w.startswith("gender prompts in ja: the model cannot tell ")]
    assert named and "predictions tie between them, each counting 1/ties" in named[0]
    assert not any(w.startswith("gender prompts in en:") for w in results["warnings"])


def test_vlfair_run_builds_its_probe_once_and_asks_once_whether_it_takes_the_model(clip_dir, tmp_path, monkeypatch):
    """The CLI used to validate the settings, then build the probe again in measure_probe, and ask three times
    whether the probe takes the model (the spec, the CLI's loaded model, measure_probe's): once each now."""
    from vlfair.probes import base, runner

    built, asked = [], []
    validate, refuse = base.Probe.validate_settings.__func__, runner.refuse_generative
    monkeypatch.setattr(base.Probe, "validate_settings",
                        classmethod(lambda cls, *a, **k: built.append(cls.name) or validate(cls, *a, **k)))
    monkeypatch.setattr(runner, "refuse_generative", lambda probe, model: asked.append(model) or refuse(probe, model))
    assert main(["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions", "--limit", "40",
                 "--out", str(tmp_path / "run"), "--set", "bootstrap=0", "--set", "n_permutations=0", "--no-figures",
                 "--dtype", "float32", "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
    assert built == ["professions"] and asked == [str(clip_dir)]


# ---- rescore --set: the same checks ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def professions_run(clip_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("rescore") / "run"
    assert main(["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions", "--out",
                 str(run), "--set", "bootstrap=0", "--set", "n_permutations=0", "--dtype", "float32",
                 "--cache-dir", str(run.parent / "cache")]) == 0
    return run


@pytest.mark.parametrize(("item", "said"), [
    ("bootstrap=true", "setting bootstrap = True: Input should be a valid integer"),
    ("confidence=.inf", "setting confidence = inf: Input should be a finite number"),
    ("seed=[1", "--set seed: '[1' is not a YAML value"),
])
def test_rescore_set_is_checked_the_same_way(professions_run, tmp_path, capsys, item, said):
    capsys.readouterr()
    assert main(["rescore", str(professions_run), "--out", str(tmp_path / "again"), "--set", item]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("vlfair rescore: ") and said in error and "Traceback" not in error


# ---- issue 43, SILENT 10 and UNCLEAR: a file read for a setting is read as the text a person wrote ----------
@pytest.mark.parametrize(("name", "data"), [
    ("concepts.txt", "\ufeffsmart\r\ndumb\r\n"),  # Notepad: a byte-order mark and Windows line ends
    ("concepts.txt", "smart\rdumb\r"),  # old Mac line ends
    ("concepts.yaml", "\ufeff- smart\r\n- dumb\r\n"),  # a YAML list saved the same way
    ("concepts.txt", "\ufeff  smart \n\n dumb\n"),
], ids=["bom-crlf", "cr", "yaml-bom-crlf", "bom-spaces"])
def test_a_list_from_a_file_is_read_as_the_words_a_person_wrote(tmp_path, name, data):
    from vlfair.probes.settings import read_override

    path = tmp_path / name
    path.write_bytes(data.encode("utf-8"))
    assert read_override(f"concepts=@{path}") == ("concepts", ["smart", "dumb"])


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "folder", "too large", "not utf-8", "missing"])
def test_a_file_that_is_no_text_file_is_one_line_and_never_read_whole(tmp_path, capsys, monkeypatch, target):
    import os

    from vlfair import yamlfile

    path = {"/dev/zero": "/dev/zero", "fifo": str(tmp_path / "fifo"), "folder": str(tmp_path),
            "too large": str(tmp_path / "big.txt"), "not utf-8": str(tmp_path / "latin.txt"),
            "missing": str(tmp_path / "missing.txt")}[target]
    if target == "fifo":
        os.mkfifo(path)  # no writer: reading it would wait forever
    elif target == "too large":
        monkeypatch.setattr(yamlfile, "MAX_TEXT_BYTES", 100)
        (tmp_path / "big.txt").write_text("smart\n" * 100)
    elif target == "not utf-8":
        (tmp_path / "latin.txt").write_bytes("très intelligent\n".encode("latin-1"))
    said = {"/dev/zero": "not a regular file", "fifo": "not a regular file", "folder": "a folder",
            "too large": "larger than the 100 bytes", "not utf-8": "not UTF-8 text", "missing": "No such file"}[target]
    error = _run_cli(capsys, tmp_path, "professions", f"professions=@{path}")
    assert error.startswith(f"vlfair run: --set professions=@{path}: ") and said in error


@pytest.mark.parametrize(("setting", "said"), [
    ("n_permutations=10000000000000", "less than or equal to 10000000"),
    ("bootstrap=1000001", "less than or equal to 1000000")])
def test_a_resampling_count_that_would_never_finish_is_refused_before_any_work(tmp_path, capsys, setting, said):
    """Issue 43, UNCLEAR: n_permutations = 1e13 on 40 rows enumerated all 2^40 relabellings (past 2 GB)."""
    error = _run_cli(capsys, tmp_path, "professions", setting)
    assert error.startswith(f"vlfair run: professions: setting {setting.replace('=', ' = ')}: Input should be {said}")
