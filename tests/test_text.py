"""Tests for zoo/text/__init__.py: the reserved tokens and the names the package gives."""



from zoo import text
from zoo.text import ids, normalization, vocabulary, wordpiece, wordpiece_bpe
from zoo.text import special as tokens


def test_reserved_ids_are_fixed():
    assert text.RESERVED_TOKENS == ("[PAD]", "[UNK]", "[START]", "[END]")
    assert (text.PAD_ID, text.UNK_ID, text.START_ID, text.END_ID) == (0, 1, 2, 3)




def test_the_package_names_what_its_modules_define():
    # `zoo.text.X` stays the import path users know; each name lives in one module.
    modules = (ids, normalization, vocabulary, wordpiece, wordpiece_bpe, tokens)
    for name in text.__all__:
        assert any(getattr(module, name, None) is getattr(text, name) for module in modules), name
