"""`gettext:LANG`: real translations read from .mo catalogs, cleaned and split by catalog."""

import struct

import pytest

from zoo import datasets
from zoo.datasets import catalogs


def write_mo(path, messages, charset="UTF-8", translator="Ana"):
    """A GNU .mo file (format revision 0) holding `messages`: {msgid: msgstr} as str.

    Keys may hold a context ("ctx\\x04id") or a plural ("one\\x00many"); values
    of plurals hold their forms separated by "\\x00".
    """
    header = (f"Last-Translator: {translator}\nContent-Type: text/plain; charset={charset}\n"
              "Plural-Forms: nplurals=2; plural=(n != 1);\n")
    entries = sorted([("", header)] + list(messages.items()))
    ids = [key.encode(charset) for key, _ in entries]
    strs = [value.encode(charset) for _, value in entries]
    start = 7 * 4 + 16 * len(entries)
    table, data = [], b""
    for blob in ids + strs:
        table.append((len(blob), start + len(data)))
        data += blob + b"\0"
    count = len(entries)
    head = struct.pack("<7I", 0x950412DE, 0, count, 28, 28 + 8 * count, 0, 0)
    body = b"".join(struct.pack("<2I", *entry) for entry in table)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + body + data)


def locale(tmp_path, language="es"):
    root = tmp_path / "locale"
    messages = root / language / "LC_MESSAGES"
    write_mo(messages / "editor.mo", {
        "_File": "_Archivo",
        "&Open": "&Abrir",
        "Audio & Video": "Audio y vídeo",
        "menu\x04Quit": "Salir",
        "%d file\x00%d files": "%d archivo\x00%d archivos",
        "Usage: editor [FILE]\n  -h  help\n": "Uso: editor [ARCHIVO]\n  -h  ayuda\n",
        "GNOME": "GNOME",
        "Saved {name} to %s.": "Se guardó {name} en %s.",
    })
    write_mo(messages / "shell.mo", {
        "Quit": "Salir",  # also in editor.mo: one side only
        "Cancel": "Cancelar",
        "Print": "Imprimir",
        "Long " + "word " * 50: "Largo " + "palabra " * 50,
    })
    write_mo(messages / "viewer.mo", {"Cancel": "Cancelar", "Zoom in": "Acercar"})
    return root


def test_read_catalog_skips_the_header_keeps_singulars_and_drops_contexts(tmp_path):
    root = locale(tmp_path)
    messages = dict(catalogs.read_catalog(root / "es/LC_MESSAGES/editor.mo"))
    assert "" not in messages
    assert messages["Quit"] == "Salir"  # the context "menu" is not text
    assert messages["%d file"] == "%d archivo"  # the singular of a plural entry
    assert len(messages) == 8


@pytest.mark.parametrize("text, expected", [
    ("_File", "File"), ("&Open", "Open"), ("Save _As…", "Save As…"),
    ("ファイル(_F)", "ファイル"), ("Audio & Video", "Audio & Video"),
    ("snake_case", "snake_case"), ("pam_*_item()", "pam_*_item()"),
    ("_at_ or _AT_", "_at_ or _AT_"),
])
def test_strip_accelerator(text, expected):
    assert catalogs.strip_accelerator(text) == expected


def test_cleaning_and_counts(tmp_path):
    train, test, meta = catalogs.gettext_pairs("es", locale(tmp_path), test_ratio=0.0)
    pairs = set(train + test)
    assert ("File", "Archivo") in pairs and ("Open", "Abrir") in pairs
    assert ("Saved {name} to %s.", "Se guardó {name} en %s.") in pairs  # placeholders kept
    assert not any("\n" in s or "\n" in t for s, t in pairs)
    assert ("GNOME", "GNOME") not in pairs
    assert meta["dropped"]["multiline"] == 1 and meta["dropped"]["untranslated"] == 1
    assert meta["dropped"]["too_long"] == 1
    assert meta["dropped"]["duplicate"] == 2  # Quit and Cancel, seen twice
    assert meta["kept"] == len(pairs) == len(train) + len(test) == 9
    assert meta["messages"] == 14


def test_the_split_is_by_catalog_and_no_test_source_is_trained_on(tmp_path):
    root = locale(tmp_path)
    for seed in range(6):
        train, test, meta = catalogs.gettext_pairs("es", root, test_ratio=0.3, seed=seed)
        assert meta["test_catalogs"] and meta["train_catalogs"]
        assert not set(meta["test_catalogs"]) & set(meta["train_catalogs"])
        assert not {s for s, _ in train} & {s for s, _ in test}
        assert train and test


def test_a_language_without_catalogs_is_one_line_listing_those_found(tmp_path):
    root = locale(tmp_path)
    write_mo(root / "de" / "LC_MESSAGES" / "x.mo", {"Yes": "Ja"})
    with pytest.raises(FileNotFoundError) as raised:
        catalogs.gettext_pairs("fr", root)
    message = str(raised.value)
    assert "\n" not in message and "'fr'" in message and message.endswith("de, es")


def test_a_catalog_that_is_not_utf8_is_skipped_and_listed(tmp_path):
    root = locale(tmp_path)
    # Python's gettext decodes the header as UTF-8 before it reads the charset.
    write_mo(root / "es/LC_MESSAGES/latin.mo", {"Größe": "Tamaño"}, charset="latin-1",
             translator="Jörg")
    _, _, meta = catalogs.gettext_pairs("es", root)
    assert meta["unreadable_catalogs"] == ["latin.mo"]


def test_load_gettext_spec(tmp_path):
    data = datasets.load("gettext:es", data_dir=locale(tmp_path), test_ratio=0.3, seed=1)
    assert data.name == "gettext-es" and data.source_language == "en"
    assert data.target_language == "es" and data.metadata["spec"] == "gettext:es"
    assert datasets.dataset_kind("gettext:de") == "translation"


@pytest.mark.skipif("es" not in catalogs.languages(), reason=(
    "needs the Spanish gettext catalogs of installed software (/usr/share/locale/es/LC_MESSAGES/"
    "*.mo), and this machine has none: packages bring them with their translations, unless a "
    "minimal image drops them (a path-exclude of /usr/share/locale in /etc/dpkg/dpkg.cfg.d/; "
    "remove it, then apt-get install --reinstall coreutils); the reader was tested on generated "
    ".mo files above"))
def test_the_machines_spanish_catalogs_give_thousands_of_pairs():
    train, test, meta = catalogs.gettext_pairs("es")
    assert len(train) > 5000 and len(test) > 100
    assert not set(meta["test_catalogs"]) & set(meta["train_catalogs"])


def test_the_long_sentence_set_keeps_messages_of_12_to_60_words_and_joins_paragraphs(tmp_path):
    root = locale(tmp_path)
    long = "Remove the selected files from the list without deleting them from the disk, please"
    write_mo(root / "es/LC_MESSAGES/help.mo", {
        long: "Quitar de la lista los archivos elegidos sin borrarlos del disco, por favor",
        "Print the resolved name of each FILE, following every symbolic link\nin every "
        "component of the name, recursively.": "Mostrar el nombre resuelto de cada ARCHIVO,\n"
        "siguiendo cada enlace simbólico de cada componente del nombre, recursivamente.",
        "  -a, --all      do not ignore entries that start with a dot, and list them\n"
        "  -A, --almost-all   do not list the implied . and .. entries\n":
        "  -a, --all      no ignorar las entradas que empiezan con punto, y listarlas\n"
        "  -A, --almost-all   no listar las entradas implícitas . y ..\n",
    })
    train, test, meta = catalogs.gettext_pairs("es", root, test_ratio=0.0, **catalogs.LONG)
    pairs = dict(train + test)
    assert pairs[long].startswith("Quitar de la lista")
    joined = ("Print the resolved name of each FILE, following every symbolic link in every "
              "component of the name, recursively.")
    assert pairs[joined] == ("Mostrar el nombre resuelto de cada ARCHIVO, siguiendo cada enlace "
                             "simbólico de cada componente del nombre, recursivamente.")
    assert ("Long " + "word " * 50).strip() in pairs  # 51 words
    assert len(pairs) == 3  # not the option tables, no short message
    assert meta["dropped"]["too_long"] == 0 and meta["dropped"]["multiline"] == 2
    assert meta["dropped"]["too_short"] == 11 and meta["min_words"] == 12
    data = datasets.load("gettext-long:es", data_dir=root, test_ratio=0.0)
    assert data.name == "gettext-long-es" and sorted(data.train_pairs) == sorted(pairs.items())
    assert datasets.dataset_kind("gettext-long:fr") == "translation"
